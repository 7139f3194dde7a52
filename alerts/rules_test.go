package alerts

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// Paths, relative to this package's directory (where go test runs).
const (
	rulesPath        = "slogate.rules.yml"
	testsGlob        = "tests/*.yml"
	runbookPath      = "../docs/runbook.md"
	prometheusRule   = "../deploy/prometheusrule.yaml"
	alertmanagerPath = "../deploy/alertmanager.yml"
	metricsDocPath   = "../docs/metrics.md"
)

// ruleFile is a Prometheus rule file, with the fields slogate's rules use.
type ruleFile struct {
	Groups []ruleGroup `yaml:"groups"`
}

type ruleGroup struct {
	Name     string `yaml:"name"`
	Interval string `yaml:"interval,omitempty"`
	Rules    []rule `yaml:"rules"`
}

type rule struct {
	Record      string            `yaml:"record,omitempty"`
	Alert       string            `yaml:"alert,omitempty"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for,omitempty"`
	Labels      map[string]string `yaml:"labels,omitempty"`
	Annotations map[string]string `yaml:"annotations,omitempty"`
}

// loadRules decodes slogate.rules.yml strictly: a misspelt field (annotation:) is an error.
func loadRules(t *testing.T) ruleFile {
	t.Helper()
	data, err := os.ReadFile(rulesPath)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f ruleFile
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("decoding %s: %v", rulesPath, err)
	}
	if len(f.Groups) == 0 {
		t.Fatalf("%s has no rule groups", rulesPath)
	}
	return f
}

// alertRules returns every alerting rule of f.
func (f ruleFile) alertRules() []rule {
	var out []rule
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				out = append(out, r)
			}
		}
	}
	return out
}

// testFiles returns the promtool unit test files.
func testFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(testsGlob)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no promtool unit tests match %s", testsGlob)
	}
	return files
}

// tool returns the path of a command the tests need, failing the test when it is missing.
func tool(t *testing.T, name, debianPackage string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is not installed (not found in PATH): make test installs it (Debian package %s)", name, debianPackage)
	}
	return path
}

// run runs a command and fails the test with its output when it does not succeed.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), name, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestPromtoolCheckRules validates the rule file's syntax and expressions.
func TestPromtoolCheckRules(t *testing.T) {
	t.Parallel()
	promtool := tool(t, "promtool", "prometheus")
	run(t, promtool, "check", "rules", rulesPath)
}

// TestPromtoolUnitTests runs every promtool unit test file.
func TestPromtoolUnitTests(t *testing.T) {
	t.Parallel()
	promtool := tool(t, "promtool", "prometheus")
	for _, f := range testFiles(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			run(t, promtool, "test", "rules", f)
		})
	}
}

// TestAlertmanagerConfig validates deploy/alertmanager.yml with amtool and checks that
// pages go to the pager and tickets to the ticket receiver.
func TestAlertmanagerConfig(t *testing.T) {
	t.Parallel()
	amtool := tool(t, "amtool", "prometheus-alertmanager")
	run(t, amtool, "check-config", alertmanagerPath)
	for _, tc := range []struct {
		name, receiver string
		labels         []string
	}{
		{name: "page", receiver: "pager", labels: []string{"alertname=SlogateEngineDown", "severity=page", "namespace=llm"}},
		{name: "ticket", receiver: "ticket", labels: []string{"alertname=SlogateProbeLooped", "severity=ticket", "namespace=llm"}},
		{name: "no severity", receiver: "ticket", labels: []string{"alertname=Other"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"config", "routes", "test", "--config.file=" + alertmanagerPath,
				"--verify.receivers=" + tc.receiver}, tc.labels...)
			run(t, amtool, args...)
		})
	}
}

// TestAlertmanagerInhibitsTicketsByPages checks the inhibition the burn-rate and shedding
// alerts rely on: a page holds back the ticket of the same alert, namespace and tier.
func TestAlertmanagerInhibitsTicketsByPages(t *testing.T) {
	data, err := os.ReadFile(alertmanagerPath)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Route struct {
			GroupBy []string `yaml:"group_by"`
		} `yaml:"route"`
		InhibitRules []struct {
			SourceMatchers []string `yaml:"source_matchers"`
			TargetMatchers []string `yaml:"target_matchers"`
			Equal          []string `yaml:"equal"`
		} `yaml:"inhibit_rules"`
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{"alertname", "namespace", "tier"} {
		if !slices.Contains(cfg.Route.GroupBy, l) {
			t.Errorf("route.group_by %v lacks %s", cfg.Route.GroupBy, l)
		}
	}
	for _, r := range cfg.InhibitRules {
		if slices.Contains(r.SourceMatchers, `severity="page"`) && slices.Contains(r.TargetMatchers, `severity="ticket"`) &&
			slices.Contains(r.Equal, "alertname") && slices.Contains(r.Equal, "tier") {
			return
		}
	}
	t.Errorf("no inhibit rule lets severity=page hold back severity=ticket with equal [alertname, tier]: %+v", cfg.InhibitRules)
}
