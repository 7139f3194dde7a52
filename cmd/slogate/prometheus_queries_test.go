package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// What the end-to-end test asks Prometheus: every dashboard panel's query, with its
// template variables filled in, and the metric names in them.

// panelQuery is one query of a dashboard panel, with its variables substituted.
type panelQuery struct{ dashboard, panel, expr string }

func (q panelQuery) String() string { return q.dashboard + " / " + q.panel }

// grafanaVariable matches a use of a Grafana variable: $name, ${name} or [[name]].
var grafanaVariable = regexp.MustCompile(`\$\{(\w+)\}|\$(\w+)|\[\[(\w+)\]\]`)

// dashboardQueries returns the query of every panel target of every dashboard, walking
// the JSON generically (rows nest panels), with each variable at its "All" value or its
// current one, and $__rate_interval at rateInterval.
func dashboardQueries() ([]panelQuery, error) {
	files, err := filepath.Glob(dashboardsGlob)
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no dashboards at %s (%v)", dashboardsGlob, err)
	}
	var out []panelQuery
	for _, f := range files {
		var dash map[string]any
		raw, err := os.ReadFile(f)
		if err == nil {
			err = json.Unmarshal(raw, &dash)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %v", f, err)
		}
		values := templateValues(dash)
		var walk func(v any, title string) error
		walk = func(v any, title string) error {
			switch v := v.(type) {
			case map[string]any:
				if s, ok := v["title"].(string); ok {
					title = s
				}
				targets, _ := v["targets"].([]any)
				for _, tg := range targets {
					if expr, ok := tg.(map[string]any)["expr"].(string); ok {
						q, err := substitute(expr, values)
						if err != nil {
							return fmt.Errorf("%s / %s: %v", filepath.Base(f), title, err)
						}
						out = append(out, panelQuery{filepath.Base(f), title, q})
					}
				}
				for _, k := range slices.Sorted(maps.Keys(v)) {
					if err := walk(v[k], title); err != nil {
						return err
					}
				}
			case []any:
				for _, x := range v {
					if err := walk(x, title); err != nil {
						return err
					}
				}
			}
			return nil
		}
		if err := walk(dash["panels"], ""); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// templateValues returns the values of a dashboard's variables: a multi-value variable's
// "All" value, else its current value.
func templateValues(dash map[string]any) map[string]string {
	values := map[string]string{"__rate_interval": rateInterval}
	templating, _ := dash["templating"].(map[string]any)
	list, _ := templating["list"].([]any)
	for _, x := range list {
		v, _ := x.(map[string]any)
		name, _ := v["name"].(string)
		current, _ := v["current"].(map[string]any)
		switch c := current["value"].(type) {
		case string:
			values[name] = c
		case []any:
			if len(c) == 1 {
				values[name], _ = c[0].(string)
			}
		}
		if all, _ := v["allValue"].(string); v["includeAll"] == true && all != "" {
			values[name] = all
		}
	}
	return values
}

// substitute replaces the variables in expr; $1 and the like (label_replace's
// replacement) are not variables.
func substitute(expr string, values map[string]string) (string, error) {
	var unknown []string
	expr = grafanaVariable.ReplaceAllStringFunc(expr, func(m string) string {
		name := strings.Trim(m, "${}[]")
		if v, ok := values[name]; ok {
			return v
		}
		if name[0] < '0' || name[0] > '9' {
			unknown = append(unknown, m)
		}
		return m
	})
	if len(unknown) > 0 {
		return "", fmt.Errorf("unknown variables %v", unknown)
	}
	return expr, nil
}

var (
	promString   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	promSelector = regexp.MustCompile(`([A-Za-z_:][A-Za-z0-9_:]*)\s*\{`)
	promSlogate  = regexp.MustCompile(`\bslogate[A-Za-z0-9_:]*`)
)

// metricNames returns the metric names a query selects: every name before a label
// matcher, and every slogate name, outside string literals.
func metricNames(expr string) []string {
	expr = promString.ReplaceAllString(expr, `""`)
	var out []string
	for _, m := range promSelector.FindAllStringSubmatch(expr, -1) {
		out = append(out, m[1])
	}
	out = append(out, promSlogate.FindAllString(expr, -1)...)
	slices.Sort(out)
	return slices.Compact(out)
}

// recordNames returns the names of the recording rules in alerts/slogate.rules.yml.
func recordNames(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Rules []struct {
				Record string `yaml:"record"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			if r.Record != "" && !slices.Contains(out, r.Record) {
				out = append(out, r.Record)
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no recording rules in %s", rulesFile)
	}
	return out
}
