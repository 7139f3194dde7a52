package dashboards

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// gpuMetrics are the GPU gauges (labels gpu, uuid) being added to the exporter next to
// this package; they count as exported until docs/metrics.md documents them.
var gpuMetrics = []string{
	"slogate_gpu_collector_up",
	"slogate_gpu_utilization_ratio",
	"slogate_gpu_memory_used_bytes",
	"slogate_gpu_memory_total_bytes",
	"slogate_gpu_power_watts",
	"slogate_gpu_temperature_celsius",
	"slogate_gpu_sm_clock_hertz",
}

// rendered returns every dashboard's JSON, failing the test on error.
func rendered(t *testing.T) []File {
	t.Helper()
	files, err := Render()
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestCommittedJSONIsGenerated(t *testing.T) {
	const hint = "dashboards/json is out of date: run `go generate ./dashboards` and commit the result"
	want := map[string]bool{}
	for _, f := range rendered(t) {
		want[f.Name] = true
		got, err := os.ReadFile(filepath.Join("json", f.Name))
		if err != nil {
			t.Errorf("%s: %v (%s)", f.Name, err, hint)
			continue
		}
		if !bytes.Equal(got, f.Data) {
			t.Errorf("%s differs from what the code generates (%s)", f.Name, hint)
		}
	}
	entries, err := os.ReadDir("json")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !want[e.Name()] {
			t.Errorf("json/%s is no dashboard the code generates: delete it, or add it to All", e.Name())
		}
	}
}

func TestRenderIsDeterministic(t *testing.T) {
	first, second := rendered(t), rendered(t)
	for i := range first {
		if !bytes.Equal(first[i].Data, second[i].Data) {
			t.Errorf("%s: two renders differ", first[i].Name)
		}
	}
}

func TestDashboardSettings(t *testing.T) {
	tests := []struct {
		file, uid string
		vars      []string
	}{
		{"overview.json", "slogate-overview", []string{varDatasource, varNamespace, varPod, varModel, varObjective, varTenant}},
		{"capacity.json", "slogate-capacity", []string{varDatasource, varNamespace, varPod}},
		{"probes.json", "slogate-probes", []string{varDatasource, varNamespace, varPod, varWorkload}},
	}
	dashboards := decoded(t)
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			d := dashboards[tt.file]
			if d.UID != tt.uid {
				t.Errorf("uid %q, want %q", d.UID, tt.uid)
			}
			if !slices.Equal(d.Tags, []string{Tag}) {
				t.Errorf("tags %q, want [%s]", d.Tags, Tag)
			}
			var names []string
			for _, v := range d.Templating.List {
				names = append(names, v.Name)
			}
			if !slices.Equal(names, tt.vars) {
				t.Errorf("variables %q, want %q", names, tt.vars)
			}
			if len(d.Templating.List) > 0 && d.Templating.List[0].Query != "prometheus" {
				t.Errorf("datasource variable of type %q, want prometheus", d.Templating.List[0].Query)
			}
		})
	}
}

func TestEveryPanelHasDescriptionUnitAndDatasource(t *testing.T) {
	for file, d := range decoded(t) {
		ids := map[int]bool{}
		for _, p := range d.panels() {
			if ids[p.ID] {
				t.Errorf("%s: panel id %d used twice", file, p.ID)
			}
			ids[p.ID] = true
			if p.Type == "row" {
				continue
			}
			if strings.TrimSpace(p.Description) == "" {
				t.Errorf("%s: panel %q has no description", file, p.Title)
			}
			if p.FieldConfig.Defaults.Unit == "" {
				t.Errorf("%s: panel %q has no unit", file, p.Title)
			}
			if p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
				t.Errorf("%s: panel %q: datasource %q, %d queries", file, p.Title, p.Datasource.UID, len(p.Targets))
			}
		}
	}
}

// TestLatencyPanelsShowExemplars: the panels of the histograms that carry trace ids as
// exemplars (TTFT, TPOT, E2E) ask for them on exactly one query, and no other panel asks
// (only those histograms have them).
func TestLatencyPanelsShowExemplars(t *testing.T) {
	withExemplars := map[string]bool{}
	for file, b := range decoded(t) {
		for _, p := range b.panels() {
			n := 0
			for _, q := range p.Targets {
				if !q.Exemplar {
					continue
				}
				n++
				if !strings.Contains(q.Expr, ttftHistogram) && !strings.Contains(q.Expr, tpotHistogram) && !strings.Contains(q.Expr, e2eHistogram) {
					t.Errorf("%s: panel %q asks for exemplars of %s, which has none", file, p.Title, q.Expr)
				}
			}
			if n > 1 {
				t.Errorf("%s: panel %q asks for exemplars on %d queries; each point would show %d times", file, p.Title, n, n)
			}
			if n == 1 {
				withExemplars[p.Title] = true
			}
		}
	}
	for _, title := range []string{"TTFT p50 / p95 / p99 by tier and model", "TPOT p50 / p95 / p99 by tier and model", "E2E p50 / p95 / p99 by tier and model"} {
		if !withExemplars[title] {
			t.Errorf("panel %q does not show exemplars", title)
		}
	}
}

func TestRatesUseRateInterval(t *testing.T) {
	for _, e := range allExprs(t) {
		for _, arg := range rangeFunctionArgs(e.expr) {
			if !strings.HasSuffix(arg, rateInterval) || strings.Count(arg, "[") != 1 {
				t.Errorf("%s: %q: rate, irate and increase must take %s, got %q", e.where, e.expr, rateInterval, arg)
			}
		}
	}
}

func TestRateFunctionArgs(t *testing.T) {
	tests := []struct {
		name, expr string
		want       []string
	}{
		{"none", `sum(x)`, nil},
		{"rate", `rate(x{a="("}[5m])`, []string{`x{a="("}[5m]`}},
		{"irate and increase", `irate(x[1m]) / increase(y[2m])`, []string{"x[1m]", "y[2m]"}},
		{"name suffix is no call", `service_rate(x) + rate(z[$__rate_interval])`, []string{"z[$__rate_interval]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := rangeFunctionArgs(tt.expr); !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestQueriesReadOnlyExportedMetrics(t *testing.T) {
	metrics := documentedMetrics(t)
	for _, m := range gpuMetrics {
		if _, ok := metrics[m]; !ok {
			metrics[m] = metric{kind: "gauge"}
		}
	}
	rules := recordingRules(t)
	used := map[string]bool{}
	for _, e := range allExprs(t) {
		for _, name := range metricName.FindAllString(e.expr, -1) {
			base, ok := exportedBase(metrics, name)
			if !ok {
				t.Errorf("%s: %s is no metric docs/metrics.md documents", e.where, name)
			}
			used[base] = true
		}
		for _, name := range recordingRule.FindAllString(e.expr, -1) {
			if !rules[name] {
				t.Errorf("%s: recording rule %s is not recorded in alerts/*.yml", e.where, name)
			}
		}
	}
	if len(used) == 0 {
		t.Error("no slogate metric in any query")
	}
}

func TestSelectorsFilterByNamespacePodAndModel(t *testing.T) {
	metrics := documentedMetrics(t)
	const scope = `{namespace=~"$namespace", pod=~"$pod"`
	for _, e := range allExprs(t) {
		if e.variable {
			continue // the variables' own queries select what the filters choose from
		}
		for _, loc := range selector.FindAllStringSubmatchIndex(e.expr, -1) {
			name, sel := e.expr[loc[2]:loc[3]], e.expr[loc[4]:loc[5]]
			if !strings.HasPrefix(sel, scope) {
				t.Errorf("%s: %s%s does not start with %s", e.where, name, sel, scope)
			}
			base, _ := exportedBase(metrics, name)
			if metrics[base].labels["model"] && !strings.Contains(sel, `model=~"$model"`) {
				t.Errorf("%s: %s%s does not filter by model", e.where, name, sel)
			}
		}
		if n, m := len(metricName.FindAllString(e.expr, -1)), len(selector.FindAllString(e.expr, -1)); n != m {
			t.Errorf("%s: %d metric names but %d selectors with labels in %q", e.where, n, m, e.expr)
		}
	}
}

// Patterns of metric names and selectors in PromQL.
var (
	metricName    = regexp.MustCompile(`slogate_[a-z0-9_]+`)
	recordingRule = regexp.MustCompile(`slogate:[a-zA-Z0-9_:]+`)
	selector      = regexp.MustCompile(`(slogate_[a-z0-9_]+)(\{[^}]*\})`)
	rangeCall     = regexp.MustCompile(`(^|[^a-zA-Z0-9_:])(rate|irate|increase)\(`)
)

// exportedBase returns the documented metric name is, or whose series it is (a
// histogram's _bucket, _sum or _count), and whether there is one.
func exportedBase(metrics map[string]metric, name string) (string, bool) {
	if _, ok := metrics[name]; ok {
		return name, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, found := strings.CutSuffix(name, suffix)
		if found && metrics[base].kind == "histogram" {
			return base, true
		}
	}
	return name, false
}

// rangeFunctionArgs returns the argument of every rate(), irate() and increase() in
// expr, skipping parentheses inside quoted strings.
func rangeFunctionArgs(expr string) []string {
	var args []string
	for _, loc := range rangeCall.FindAllStringIndex(expr, -1) {
		start, depth, quoted := loc[1], 1, false
		for i := start; i < len(expr) && depth > 0; i++ {
			switch c := expr[i]; {
			case quoted && c == '\\':
				i++
			case c == '"':
				quoted = !quoted
			case !quoted && c == '(':
				depth++
			case !quoted && c == ')':
				depth--
				if depth == 0 {
					args = append(args, expr[start:i])
				}
			}
		}
	}
	return args
}
