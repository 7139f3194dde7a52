package alerts

import (
	"bytes"
	"os"
	"reflect"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestPrometheusRuleUpToDate checks that deploy/prometheusrule.yaml is what
// `go generate ./alerts/` writes from the current rules.
func TestPrometheusRuleUpToDate(t *testing.T) {
	rules, err := os.ReadFile(rulesPath)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(prometheusRule)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, PrometheusRule(rules)) {
		t.Errorf("%s is out of date with %s: run go generate ./alerts/", prometheusRule, rulesPath)
	}
}

// TestPrometheusRuleGroups checks that deploy/prometheusrule.yaml is a
// monitoring.coreos.com/v1 PrometheusRule whose spec.groups equal the rule file's groups,
// decoded independently of how the file was written.
func TestPrometheusRuleGroups(t *testing.T) {
	var rules struct {
		Groups []any `yaml:"groups"`
	}
	decodeFile(t, rulesPath, &rules)
	var pr struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Metadata   struct {
			Name string `yaml:"name"`
		} `yaml:"metadata"`
		Spec struct {
			Groups []any `yaml:"groups"`
		} `yaml:"spec"`
	}
	decodeFile(t, prometheusRule, &pr)
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" || pr.Metadata.Name == "" {
		t.Errorf("%s: apiVersion %q, kind %q, name %q; want a named monitoring.coreos.com/v1 PrometheusRule",
			prometheusRule, pr.APIVersion, pr.Kind, pr.Metadata.Name)
	}
	if len(rules.Groups) == 0 {
		t.Fatalf("%s has no groups", rulesPath)
	}
	if !reflect.DeepEqual(pr.Spec.Groups, rules.Groups) {
		t.Errorf("%s: spec.groups differ from the groups of %s: run go generate ./alerts/", prometheusRule, rulesPath)
	}
}

func TestPrometheusRuleDropsLeadingComments(t *testing.T) {
	in := "# about\n\n# more\ngroups:\n  # a group\n  - name: g\n\n    rules: []\n"
	want := prometheusRuleHeader + "  groups:\n    # a group\n    - name: g\n\n      rules: []\n"
	if got := string(PrometheusRule([]byte(in))); got != want {
		t.Errorf("PrometheusRule:\n%s\nwant:\n%s", got, want)
	}
}

func decodeFile(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, v); err != nil {
		t.Fatalf("decoding %s: %v", path, err)
	}
}
