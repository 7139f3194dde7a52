package alerts

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slogate/slogate/sidecar"
)

var (
	// metricName matches the slogate metrics an expression reads (not recorded series,
	// which contain colons).
	metricName = regexp.MustCompile(`\bslogate_[a-z0-9_]+`)
)

// TestRulesUseDocumentedMetrics checks that every slogate metric the rules read is one
// docs/metrics.md documents, so a renamed metric cannot leave a rule matching nothing.
func TestRulesUseDocumentedMetrics(t *testing.T) {
	doc, err := os.ReadFile(metricsDocPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range allRules(loadRules(t)) {
		for _, m := range metricName.FindAllString(r.Expr, -1) {
			base := m
			for _, suffix := range []string{"_bucket", "_count", "_sum"} {
				if b, ok := strings.CutSuffix(m, suffix); ok && strings.Contains(string(doc), "`"+b+"`") {
					base = b
				}
			}
			if !strings.Contains(string(doc), "`"+base+"`") {
				t.Errorf("rule %s%s reads %s, which %s does not document", r.Alert, r.Record, m, metricsDocPath)
			}
		}
	}
}

func allRules(f ruleFile) []rule {
	var out []rule
	for _, g := range f.Groups {
		out = append(out, g.Rules...)
	}
	return out
}

// TestLatencySLIThresholds checks that the le matchers of the latency SLIs select the
// bucket at slogate's default SLO thresholds (--slo-ttft, --slo-tpot: sidecar.DefaultConfig),
// where slogate guarantees a bucket boundary, in the text format's form ("2") and in
// OpenMetrics' ("2.0").
func TestLatencySLIThresholds(t *testing.T) {
	rules := allRules(loadRules(t))
	defaults := sidecar.DefaultConfig()
	for _, tc := range []struct {
		flag, histogram string
		threshold       time.Duration
	}{
		{flag: "slo-ttft", histogram: "slogate_time_to_first_token_seconds_bucket", threshold: defaults.SLOTTFT},
		{flag: "slo-tpot", histogram: "slogate_time_per_output_token_seconds_bucket", threshold: defaults.SLOTPOT},
	} {
		t.Run(tc.flag, func(t *testing.T) {
			threshold := tc.threshold
			forms := leForms(threshold)
			selector := regexp.MustCompile(regexp.QuoteMeta(tc.histogram) + `\{([^}]*)\}`)
			found := 0
			for _, r := range rules {
				for _, m := range selector.FindAllStringSubmatch(r.Expr, -1) {
					found++
					matches, err := leMatcher(m[1])
					if err != nil {
						t.Fatalf("rule %s: %v", r.Record, err)
					}
					for _, le := range forms {
						if !matches(le) {
							t.Errorf("rule %s: %s{%s} does not select le=%q, the bucket at the default --%s %v (change the rules with the default)",
								r.Record, tc.histogram, m[1], le, tc.flag, threshold)
						}
					}
				}
			}
			if found == 0 {
				t.Fatalf("no rule reads %s", tc.histogram)
			}
		})
	}
}

// leForms returns how a bucket boundary of d is written: by the text format (Go's
// shortest float form, "2", "0.1") and by OpenMetrics (with ".0" on whole numbers).
func leForms(d time.Duration) []string {
	text := strconv.FormatFloat(d.Seconds(), 'g', -1, 64)
	if strings.ContainsAny(text, ".e") {
		return []string{text}
	}
	return []string{text, text + ".0"}
}

// leMatcher returns a function that reports whether the le matcher in the label matchers
// (as in `le="2"` or `le=~"2(\\.0)?"`) selects a value.
func leMatcher(matchers string) (func(string) bool, error) {
	m := regexp.MustCompile(`\ble\s*(=~|=)\s*("(?:[^"\\]|\\.)*")`).FindStringSubmatch(matchers)
	if m == nil {
		return nil, fmt.Errorf("no le matcher in {%s}", matchers)
	}
	value, err := strconv.Unquote(m[2])
	if err != nil {
		return nil, fmt.Errorf("le matcher %s: %v", m[2], err)
	}
	if m[1] == "=" {
		return func(s string) bool { return s == value }, nil
	}
	re, err := regexp.Compile("^(?:" + value + ")$")
	if err != nil {
		return nil, fmt.Errorf("le matcher %s: %v", m[2], err)
	}
	return re.MatchString, nil
}

func TestLEMatcher(t *testing.T) {
	for _, tc := range []struct {
		matchers string
		in       string
		want     bool
	}{
		{matchers: `le="0.1"`, in: "0.1", want: true},
		{matchers: `le="0.1"`, in: "0.15", want: false},
		{matchers: `le=~"2(\\.0)?"`, in: "2", want: true},
		{matchers: `le=~"2(\\.0)?"`, in: "2.0", want: true},
		{matchers: `le=~"2(\\.0)?"`, in: "2.5", want: false},
		{matchers: `tier="a", le=~"2(\\.0)?"`, in: "12", want: false},
	} {
		matches, err := leMatcher(tc.matchers)
		if err != nil {
			t.Fatal(err)
		}
		if got := matches(tc.in); got != tc.want {
			t.Errorf("{%s} selects %q: %v, want %v", tc.matchers, tc.in, got, tc.want)
		}
	}
}
