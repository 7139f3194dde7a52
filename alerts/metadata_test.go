package alerts

import (
	"bufio"
	"os"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"go.yaml.in/yaml/v3"
)

// runbookURL is where every alert's runbook_url points, followed by #anchor.
const runbookURL = "https://github.com/slogate/slogate/blob/main/docs/runbook.md"

// TestAlertMetadata checks that every alert carries a severity of page or ticket, a
// summary, a description and a runbook_url whose anchor is the alert's own heading in
// docs/runbook.md.
func TestAlertMetadata(t *testing.T) {
	anchors := runbookAnchors(t)
	for _, r := range loadRules(t).alertRules() {
		name := r.Alert + "/" + r.Labels["severity"]
		switch r.Labels["severity"] {
		case "page", "ticket":
		default:
			t.Errorf("%s: label severity is %q, want page or ticket", name, r.Labels["severity"])
		}
		for _, a := range []string{"summary", "description", "runbook_url"} {
			if strings.TrimSpace(r.Annotations[a]) == "" {
				t.Errorf("%s: annotation %s is missing", name, a)
			}
		}
		url := r.Annotations["runbook_url"]
		base, anchor, _ := strings.Cut(url, "#")
		if base != runbookURL || anchor != strings.ToLower(r.Alert) {
			t.Errorf("%s: runbook_url %q, want %s#%s", name, url, runbookURL, strings.ToLower(r.Alert))
		}
		if !anchors[anchor] {
			t.Errorf("%s: %s has no heading with anchor #%s (a heading %q)", name, runbookPath, anchor, r.Alert)
		}
	}
}

// runbookAnchors returns the anchors GitHub gives the headings of docs/runbook.md.
func runbookAnchors(t *testing.T) map[string]bool {
	t.Helper()
	f, err := os.Open(runbookPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	anchors := map[string]bool{}
	fenced := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		anchors[headingAnchor(strings.TrimLeft(line, "#"))] = true
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return anchors
}

// headingAnchor is GitHub's anchor for a Markdown heading: lower case, punctuation other
// than - and _ dropped, spaces turned into hyphens.
func headingAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestHeadingAnchor(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{in: " SlogateEngineDown", want: "slogateenginedown"},
		{in: " Burn rates: page & ticket", want: "burn-rates-page--ticket"},
		{in: "  max_queue_wait (per tier)", want: "max_queue_wait-per-tier"},
	} {
		if got := headingAnchor(tc.in); got != tc.want {
			t.Errorf("headingAnchor(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// promtoolTests is what the coverage check reads from a promtool unit test file.
type promtoolTests struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		Name          string `yaml:"name"`
		AlertRuleTest []struct {
			EvalTime  string `yaml:"eval_time"`
			Alertname string `yaml:"alertname"`
			ExpAlerts []struct {
				ExpLabels map[string]string `yaml:"exp_labels"`
			} `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
		PromQLExprTest []struct {
			Expr string `yaml:"expr"`
		} `yaml:"promql_expr_test"`
	} `yaml:"tests"`
}

// TestEveryAlertIsTested checks the promtool tests against the rules: every alert fires
// in some test with each severity it has, and is expected silent at some evaluation; no
// test names an alert that does not exist (its empty exp_alerts would pass vacuously);
// and some test checks the value of a recording rule.
func TestEveryAlertIsTested(t *testing.T) {
	rules := loadRules(t)
	alerts := map[string]bool{}        // alert names
	severities := map[[2]string]bool{} // alert name, severity
	records := map[string]bool{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				alerts[r.Alert] = true
				severities[[2]string{r.Alert, r.Labels["severity"]}] = true
			}
			if r.Record != "" {
				records[r.Record] = true
			}
		}
	}
	fired := map[[2]string]bool{}
	silent := map[string]bool{}
	recordChecked := false
	for _, path := range testFiles(t) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var f promtoolTests
		if err := yaml.Unmarshal(data, &f); err != nil {
			t.Fatalf("decoding %s: %v", path, err)
		}
		if len(f.RuleFiles) != 1 || f.RuleFiles[0] != "../"+rulesPath {
			t.Errorf("%s: rule_files %v, want [../%s]", path, f.RuleFiles, rulesPath)
		}
		for _, tc := range f.Tests {
			for _, a := range tc.AlertRuleTest {
				if !alerts[a.Alertname] {
					t.Errorf("%s, test %q: alert %s at %s does not exist", path, tc.Name, a.Alertname, a.EvalTime)
				}
				if len(a.ExpAlerts) == 0 {
					silent[a.Alertname] = true
				}
				for _, e := range a.ExpAlerts {
					fired[[2]string{a.Alertname, e.ExpLabels["severity"]}] = true
				}
			}
			for _, e := range tc.PromQLExprTest {
				if records[strings.TrimSpace(e.Expr)] {
					recordChecked = true
				}
			}
		}
	}
	for as := range severities {
		if !fired[as] {
			t.Errorf("no promtool test fires %s with severity %s", as[0], as[1])
		}
	}
	for a := range alerts {
		if !silent[a] {
			t.Errorf("no promtool test expects %s not to fire (exp_alerts: [])", a)
		}
	}
	if !recordChecked {
		t.Error("no promtool test checks the value of a recording rule (promql_expr_test)")
	}
}

// recordName is the form of slogate's recording rules, and sloWindows the windows of the
// multiwindow multi-burn-rate alerts (REFERENCE.md: 1h/5m, 6h/30m, 1d/2h, 3d/6h).
var (
	recordName = regexp.MustCompile(`^slogate:([a-z_]+):ratio_rate([0-9]+[mhd])$`)
	recordRef  = regexp.MustCompile(`slogate:[a-z_]+:[a-z_0-9]+`)
	sloWindows = []string{"5m", "30m", "1h", "2h", "6h", "1d", "3d"}
)

// TestRecordingRules checks the recording rules' names and windows: each SLI is recorded
// over every window the alerts use, and the alerts use only recorded series.
func TestRecordingRules(t *testing.T) {
	rules := loadRules(t)
	windows := map[string]map[string]bool{} // SLI -> windows
	records := map[string]bool{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Record == "" {
				continue
			}
			m := recordName.FindStringSubmatch(r.Record)
			if m == nil {
				t.Errorf("recording rule %s is not named slogate:<sli>:ratio_rate<window>", r.Record)
				continue
			}
			if windows[m[1]] == nil {
				windows[m[1]] = map[string]bool{}
			}
			windows[m[1]][m[2]] = true
			records[r.Record] = true
		}
	}
	for _, sli := range []string{"ttft_bad", "tpot_bad", "availability_bad"} {
		for _, w := range sloWindows {
			if !windows[sli][w] {
				t.Errorf("no recording rule slogate:%s:ratio_rate%s", sli, w)
			}
		}
	}
	for _, r := range rules.alertRules() {
		for _, ref := range recordRef.FindAllString(r.Expr, -1) {
			if !records[ref] {
				t.Errorf("alert %s uses %s, which no rule records", r.Alert, ref)
			}
		}
	}
}
