package deploy

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/template"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// This file checks the autoscaling examples of deploy/autoscaling against the rest of
// deploy/ and against what slogate exports: KEDA's ScaledObject and the HPA decode
// strictly, scale the Deployment the base and the overlays render, read a metric slogate
// exports, from the admin Service the ServiceMonitor scrapes, with the target type their
// query needs and stabilisation windows longer than a GPU replica takes to start; the
// HPA's metric is the one prometheus-adapter's rule serves; and every query parses
// (promtool, where it is installed), and docs/operations.md quotes them as they are.

// scaledObject is keda.sh/v1alpha1 ScaledObject as kedacore/keda declares it
// (apis/keda/v1alpha1/scaledobject_types.go, scaletriggers_types.go), without the
// status and the advanced scalingModifiers, which the examples do not use.
type scaledObject struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            struct {
		ScaleTargetRef *struct {
			Name                   string `json:"name"`
			APIVersion             string `json:"apiVersion,omitempty"`
			Kind                   string `json:"kind,omitempty"`
			EnvSourceContainerName string `json:"envSourceContainerName,omitempty"`
		} `json:"scaleTargetRef"`
		PollingInterval       *int32 `json:"pollingInterval,omitempty"`
		InitialCooldownPeriod *int32 `json:"initialCooldownPeriod,omitempty"`
		CooldownPeriod        *int32 `json:"cooldownPeriod,omitempty"`
		IdleReplicaCount      *int32 `json:"idleReplicaCount,omitempty"`
		MinReplicaCount       *int32 `json:"minReplicaCount,omitempty"`
		MaxReplicaCount       *int32 `json:"maxReplicaCount,omitempty"`
		Advanced              *struct {
			HorizontalPodAutoscalerConfig *struct {
				Behavior *autoscalingv2.HorizontalPodAutoscalerBehavior `json:"behavior,omitempty"`
				Name     string                                         `json:"name,omitempty"`
			} `json:"horizontalPodAutoscalerConfig,omitempty"`
			RestoreToOriginalReplicaCount bool `json:"restoreToOriginalReplicaCount,omitempty"`
		} `json:"advanced,omitempty"`
		Triggers []kedaTrigger `json:"triggers"`
		Fallback *struct {
			FailureThreshold int32  `json:"failureThreshold"`
			Replicas         int32  `json:"replicas"`
			Behavior         string `json:"behavior,omitempty"`
		} `json:"fallback,omitempty"`
	} `json:"spec"`
}

// kedaTrigger is KEDA's ScaleTriggers.
type kedaTrigger struct {
	Type              string            `json:"type"`
	Name              string            `json:"name,omitempty"`
	UseCachedMetrics  bool              `json:"useCachedMetrics,omitempty"`
	Metadata          map[string]string `json:"metadata"`
	AuthenticationRef *struct {
		Name string `json:"name"`
		Kind string `json:"kind,omitempty"`
	} `json:"authenticationRef,omitempty"`
	MetricType autoscalingv2.MetricTargetType `json:"metricType,omitempty"`
}

// prometheusScalerKeys are the metadata KEDA's prometheus scaler reads
// (pkg/scalers/prometheus_scaler.go, prometheusMetadata), true for those it requires.
var prometheusScalerKeys = map[string]bool{
	"serverAddress": true, "query": true, "threshold": true,
	"queryParameters": false, "activationThreshold": false, "namespace": false, "customHeaders": false,
	"ignoreNullValues": false, "unsafeSsl": false, "awsRegion": false, "timeout": false,
}

// fallbackBehaviors are the values KEDA's CRD allows for fallback.behavior.
var fallbackBehaviors = []string{"", "static", "currentReplicas", "currentReplicasIfHigher", "currentReplicasIfLower"}

// adapterConfig is the part of prometheus-adapter's configuration file the rule uses
// (kubernetes-sigs/prometheus-adapter, pkg/config/config.go: MetricsDiscoveryConfig).
type adapterConfig struct {
	Rules []adapterRule `json:"rules"`
}

// adapterRule is prometheus-adapter's DiscoveryRule.
type adapterRule struct {
	SeriesQuery   string `json:"seriesQuery"`
	SeriesFilters []struct {
		Is    string `json:"is,omitempty"`
		IsNot string `json:"isNot,omitempty"`
	} `json:"seriesFilters,omitempty"`
	Resources struct {
		Template  string `json:"template,omitempty"`
		Overrides map[string]struct {
			Group    string `json:"group,omitempty"`
			Resource string `json:"resource"`
		} `json:"overrides,omitempty"`
	} `json:"resources"`
	Name struct {
		Matches string `json:"matches"`
		As      string `json:"as"`
	} `json:"name"`
	MetricsQuery string `json:"metricsQuery,omitempty"`
}

const (
	// demandMetric is the gauge the examples scale on: each tier's load offered over
	// the last minute divided by its calibrated λ*.
	demandMetric = "slogate_admission_demand_ratio"
	// metricsDoc documents every metric slogate exports.
	metricsDoc = "../docs/metrics.md"
	// operationsDoc explains the examples, quoting their queries.
	operationsDoc = "../docs/operations.md"
	// adapterRules is prometheus-adapter's rule for the HPA example.
	adapterRules = "autoscaling/hpa/prometheus-adapter-rules.yaml"
	// replicaStart is how long a GPU replica takes to be ready at the least: scheduled,
	// its image pulled, its weights loaded. The autoscalers must not give one up on a
	// lull shorter than that.
	replicaStart = 5 * time.Minute
)

// slogateMetric matches the slogate metrics a query reads.
var slogateMetric = regexp.MustCompile(`\bslogate_[a-z0-9_]+`)

// TestAutoscaling renders both examples and checks them against the base, the overlays
// and each other.
func TestAutoscaling(t *testing.T) {
	targets := scaleTargets(t)
	adminService := adminServiceName(t)
	exported := exportedMetrics(t)
	rule := loadAdapterRule(t)
	var queries []string // every PromQL expression, for promtool
	var behaviors []*autoscalingv2.HorizontalPodAutoscalerBehavior

	t.Run("keda", func(t *testing.T) {
		forEachRendering(t, "autoscaling/keda", func(t *testing.T, m *manifests) {
			for name, so := range alone(t, m, m.ScaledObjects) {
				checkKEDA(t, "ScaledObject/"+name, so, targets, adminService, exported)
				queries = append(queries, so.Spec.Triggers[0].Metadata["query"])
				behaviors = append(behaviors, so.Spec.Advanced.HorizontalPodAutoscalerConfig.Behavior)
			}
		})
	})
	t.Run("hpa", func(t *testing.T) {
		forEachRendering(t, "autoscaling/hpa", func(t *testing.T, m *manifests) {
			for name, hpa := range alone(t, m, m.HPAs) {
				checkHPA(t, "HorizontalPodAutoscaler/"+name, hpa, targets, rule.Name.As)
				behaviors = append(behaviors, hpa.Spec.Behavior)
			}
		})
	})
	t.Run("adapter", func(t *testing.T) {
		queries = append(queries, checkAdapterRule(t, rule, exported)...)
	})
	t.Run("same plan", func(t *testing.T) {
		if len(behaviors) < 2 {
			t.Fatalf("%d behaviours to compare; want the ScaledObject's and the HPA's", len(behaviors))
		}
		for _, b := range behaviors[1:] {
			if !reflect.DeepEqual(b, behaviors[0]) {
				t.Errorf("the examples scale by different behaviours:\n%+v\n%+v", b, behaviors[0])
			}
		}
	})
	t.Run("promtool", func(t *testing.T) {
		checkPromQL(t, queries)
	})
	t.Run("docs", func(t *testing.T) {
		doc, err := os.ReadFile(operationsDoc)
		if err != nil || len(queries) == 0 {
			t.Fatalf("%v; %d queries", err, len(queries))
		}
		for _, q := range append(queries[:1:1], rule.SeriesQuery, rule.MetricsQuery) {
			if !bytes.Contains(doc, []byte(q)) {
				t.Errorf("%s does not quote %q as the examples have it", operationsDoc, q)
			}
		}
	})
}

// forEachRendering runs check on each rendering of dir (renderings), in a subtest named
// by who rendered it.
func forEachRendering(t *testing.T, dir string, check func(*testing.T, *manifests)) {
	t.Helper()
	for by, m := range renderings(t, dir) {
		t.Run(by, func(t *testing.T) { check(t, m) })
	}
}

// alone returns objs, one of m's kinds, failing the test unless it holds m's one object.
func alone[T any](t *testing.T, m *manifests, objs map[string]*T) map[string]*T {
	t.Helper()
	if len(objs) != 1 || m.objects() != 1 {
		t.Fatalf("%d objects of type %T among %d; want one, alone", len(objs), (*T)(nil), m.objects())
	}
	return objs
}

// objects counts the objects of every kind.
func (m *manifests) objects() int {
	return len(m.Deployments) + len(m.Services) + len(m.ConfigMaps) + len(m.CronJobs) + len(m.ServiceMonitors) +
		len(m.Rules) + len(m.ScaledObjects) + len(m.HPAs)
}

// scaleTargets returns the Deployments that the base and every overlay render, by name,
// with the number of renderings that have each; an autoscaler must scale one all have.
func scaleTargets(t *testing.T) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, dir := range []string{"base", "overlays/vllm", "overlays/sglang"} {
		objs, err := render(dir)
		if err != nil {
			t.Fatal(err)
		}
		m, err := decodeAll(objs)
		if err != nil {
			t.Fatal(err)
		}
		for name := range m.Deployments {
			out[name]++
		}
	}
	return out
}

// adminServiceName returns the name of the Service the base's ServiceMonitor scrapes: the
// service label of every slogate series.
func adminServiceName(t *testing.T) string {
	t.Helper()
	objs, err := render("base")
	if err != nil {
		t.Fatal(err)
	}
	m, err := decodeAll(objs)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, sm := range m.ServiceMonitors {
		sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
		if err != nil {
			t.Fatal(err)
		}
		for _, svc := range m.Services {
			if sel.Matches(labels.Set(svc.Labels)) {
				names = append(names, svc.Name)
			}
		}
	}
	if len(names) != 1 {
		t.Fatalf("the base's ServiceMonitors select the Services %v; want the admin Service alone", names)
	}
	return names[0]
}

// exportedMetrics returns the metrics slogate exports: those docs/metrics.md documents
// (in backquotes) and the pending ones.
func exportedMetrics(t *testing.T) func(string) bool {
	t.Helper()
	doc, err := os.ReadFile(metricsDoc)
	if err != nil {
		t.Fatal(err)
	}
	return func(name string) bool {
		return bytes.Contains(doc, []byte("`"+name+"`"))
	}
}

// checkMetrics checks that query reads the demand ratio and no metric slogate does not
// export.
func checkMetrics(t *testing.T, where, query string, exported func(string) bool) {
	t.Helper()
	names := slogateMetric.FindAllString(query, -1)
	if !slices.Contains(names, demandMetric) {
		t.Errorf("%s: %q does not read %s", where, query, demandMetric)
	}
	for _, n := range names {
		if !exported(n) {
			t.Errorf("%s: %q reads %s, which slogate does not export (%s does not document it)", where, query, n, metricsDoc)
		}
	}
}

// checkTarget checks a scaleTargetRef: an apps/v1 Deployment every rendering has.
func checkTarget(t *testing.T, where, apiVersion, kind, name string, targets map[string]int) {
	t.Helper()
	if apiVersion != "apps/v1" || kind != "Deployment" || targets[name] != 3 {
		t.Errorf("%s scales %s %s %q; want the apps/v1 Deployment of the base and the overlays (%v)", where, apiVersion, kind, name, targets)
	}
}

// checkReplicas checks the bounds: never to zero, since with no pod nothing measures the
// demand that would bring one back.
func checkReplicas(t *testing.T, where string, lowest, highest int32) {
	t.Helper()
	if lowest < 1 || highest <= lowest {
		t.Errorf("%s: replicas %d to %d; want at least 1 (with no pod no one measures the demand) and room above", where, lowest, highest)
	}
}

// checkBehavior checks the HPA behaviour: scale-up bounded per period, scale-down held
// back longer than a replica takes to start, and each direction limited by a policy.
func checkBehavior(t *testing.T, where string, b *autoscalingv2.HorizontalPodAutoscalerBehavior) {
	t.Helper()
	if b == nil || b.ScaleUp == nil || b.ScaleDown == nil {
		t.Fatalf("%s: no behaviour for both directions; the HPA's defaults drop replicas after 5 minutes and add up to 4 pods every 15 s", where)
	}
	if w := b.ScaleDown.StabilizationWindowSeconds; w == nil || time.Duration(*w)*time.Second < 2*replicaStart {
		t.Errorf("%s: scale-down stabilisation %v s; want at least %v (a replica given up takes %v or more to come back)", where, w, 2*replicaStart, replicaStart)
	}
	for dir, rules := range map[string]*autoscalingv2.HPAScalingRules{"up": b.ScaleUp, "down": b.ScaleDown} {
		if len(rules.Policies) == 0 {
			t.Errorf("%s: no policy bounds the scale-%s", where, dir)
		}
		for _, p := range rules.Policies {
			if time.Duration(p.PeriodSeconds)*time.Second < replicaStart {
				t.Errorf("%s: scale-%s policy %+v acts every %d s; want periods of at least %v, the time a replica takes to start and correct the signal", where, dir, p, p.PeriodSeconds, replicaStart)
			}
		}
	}
}

// checkKEDA checks the ScaledObject.
func checkKEDA(t *testing.T, where string, so *scaledObject, targets map[string]int, adminService string, exported func(string) bool) {
	t.Helper()
	s := so.Spec
	if s.ScaleTargetRef == nil || s.MinReplicaCount == nil || s.MaxReplicaCount == nil {
		t.Fatalf("%s: want a scaleTargetRef and both replica bounds", where)
	}
	checkTarget(t, where, s.ScaleTargetRef.APIVersion, s.ScaleTargetRef.Kind, s.ScaleTargetRef.Name, targets)
	checkReplicas(t, where, *s.MinReplicaCount, *s.MaxReplicaCount)
	if s.IdleReplicaCount != nil {
		t.Errorf("%s: idleReplicaCount %d; the trigger cannot bring a replica back from idle", where, *s.IdleReplicaCount)
	}
	if s.Advanced == nil || s.Advanced.HorizontalPodAutoscalerConfig == nil {
		t.Fatalf("%s: no advanced.horizontalPodAutoscalerConfig behaviour", where)
	}
	checkBehavior(t, where, s.Advanced.HorizontalPodAutoscalerConfig.Behavior)
	if len(s.Triggers) != 1 || s.Triggers[0].Type != "prometheus" {
		t.Fatalf("%s: triggers %+v; want one prometheus trigger", where, s.Triggers)
	}
	tr := s.Triggers[0]
	// The query is the sum over pods; only an AverageValue target divides it by the
	// replicas (and only such a trigger can have a fallback).
	if tr.MetricType != autoscalingv2.AverageValueMetricType {
		t.Errorf("%s: metricType %q; want AverageValue, which sizes the Deployment by the sum the query returns", where, tr.MetricType)
	}
	for k := range tr.Metadata {
		if _, ok := prometheusScalerKeys[k]; !ok {
			t.Errorf("%s: metadata %s is no setting of KEDA's prometheus scaler", where, k)
		}
	}
	for k, required := range prometheusScalerKeys {
		if _, ok := tr.Metadata[k]; required && !ok {
			t.Errorf("%s: metadata lacks %s, which KEDA's prometheus scaler requires", where, k)
		}
	}
	if th, err := strconv.ParseFloat(tr.Metadata["threshold"], 64); err != nil || th <= 0 || th >= 1 {
		t.Errorf("%s: threshold %q; want a demand ratio below 1, the headroom each replica keeps under its λ*", where, tr.Metadata["threshold"])
	}
	if v := tr.Metadata["ignoreNullValues"]; v != "false" {
		t.Errorf("%s: ignoreNullValues %q; want \"false\", so that no series (no λ*, Prometheus lost) is an error, not a demand of 0", where, v)
	}
	query := tr.Metadata["query"]
	checkMetrics(t, where, query, exported)
	if !strings.HasPrefix(query, "sum(") {
		t.Errorf("%s: query %q is not a sum over the pods, which AverageValue divides by the replicas", where, query)
	}
	if want := `service="` + adminService + `"`; !strings.Contains(query, want) {
		t.Errorf("%s: query %q does not select %s, the admin Service the ServiceMonitor scrapes", where, query, want)
	}
	if f := s.Fallback; f == nil || f.FailureThreshold < 1 || !slices.Contains(fallbackBehaviors, f.Behavior) {
		t.Errorf("%s: fallback %+v; want one, after a failure or more, of a behaviour KEDA knows", where, f)
	}
}

// checkHPA checks the HorizontalPodAutoscaler.
func checkHPA(t *testing.T, where string, hpa *autoscalingv2.HorizontalPodAutoscaler, targets map[string]int, served string) {
	t.Helper()
	s := hpa.Spec
	checkTarget(t, where, s.ScaleTargetRef.APIVersion, s.ScaleTargetRef.Kind, s.ScaleTargetRef.Name, targets)
	if s.MinReplicas == nil {
		t.Errorf("%s: no minReplicas", where)
	} else {
		checkReplicas(t, where, *s.MinReplicas, s.MaxReplicas)
	}
	checkBehavior(t, where, s.Behavior)
	if len(s.Metrics) != 1 || s.Metrics[0].Type != autoscalingv2.PodsMetricSourceType || s.Metrics[0].Pods == nil {
		t.Fatalf("%s: metrics %+v; want one Pods metric", where, s.Metrics)
	}
	pods := s.Metrics[0].Pods
	if pods.Metric.Name != served || pods.Metric.Name != demandMetric {
		t.Errorf("%s: reads %q; want %s, which prometheus-adapter's rule serves as %q", where, pods.Metric.Name, demandMetric, served)
	}
	avg := pods.Target.AverageValue
	if pods.Target.Type != autoscalingv2.AverageValueMetricType || avg == nil || avg.Sign() <= 0 || avg.AsApproximateFloat64() >= 1 {
		t.Errorf("%s: target %+v; want an averageValue below 1, the headroom each replica keeps under its λ*", where, pods.Target)
	}
}

// loadAdapterRule decodes prometheus-adapter's rule file strictly and returns its rule.
func loadAdapterRule(t *testing.T) adapterRule {
	t.Helper()
	data, err := os.ReadFile(adapterRules)
	if err != nil {
		t.Fatal(err)
	}
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		t.Fatalf("%s: %v", adapterRules, err)
	}
	var cfg adapterConfig
	if err := strictUnmarshal(j, &cfg); err != nil {
		t.Fatalf("%s: %v", adapterRules, err)
	}
	if len(cfg.Rules) != 1 {
		t.Fatalf("%s: %d rules; want the demand ratio's", adapterRules, len(cfg.Rules))
	}
	return cfg.Rules[0]
}

// checkAdapterRule checks prometheus-adapter's rule: it serves the demand ratio under its
// own name, per pod and namespace (the labels the ServiceMonitor sets), and its queries
// expand as the adapter expands them. It returns the queries, expanded.
func checkAdapterRule(t *testing.T, r adapterRule, exported func(string) bool) []string {
	t.Helper()
	checkMetrics(t, adapterRules+": seriesQuery", r.SeriesQuery, exported)
	matches, err := regexp.Compile(r.Name.Matches)
	if err != nil || !matches.MatchString(demandMetric) || r.Name.As != demandMetric {
		t.Errorf("%s: name %+v (%v); want %s served under its own name", adapterRules, r.Name, err, demandMetric)
	}
	for label, resource := range map[string]string{"namespace": "namespace", "pod": "pod"} {
		if o, ok := r.Resources.Overrides[label]; !ok || o.Resource != resource || o.Group != "" {
			t.Errorf("%s: label %s is not mapped to the %s resource (%+v)", adapterRules, label, resource, r.Resources.Overrides)
		}
	}
	// The adapter's template: << >> delimiters, the series name, the matchers of the
	// objects asked for and the labels to group by (pkg/config/config.go, MetricsQuery).
	tmpl, err := template.New("metricsQuery").Delims("<<", ">>").Option("missingkey=error").Parse(r.MetricsQuery)
	if err != nil {
		t.Fatalf("%s: metricsQuery: %v", adapterRules, err)
	}
	var q strings.Builder
	if err := tmpl.Execute(&q, map[string]string{
		"Series": demandMetric, "LabelMatchers": `namespace="default",pod=~"llm-7d9f8-abcde|llm-7d9f8-fghij"`, "GroupBy": "pod",
	}); err != nil {
		t.Fatalf("%s: metricsQuery: %v", adapterRules, err)
	}
	if !strings.Contains(r.MetricsQuery, "sum by (<<.GroupBy>>)") {
		t.Errorf("%s: metricsQuery %q does not add each pod's tiers up by pod", adapterRules, r.MetricsQuery)
	}
	checkMetrics(t, adapterRules+": metricsQuery", q.String(), exported)
	return []string{r.SeriesQuery, q.String()}
}

// checkPromQL parses every query with promtool, as the expressions of a rule file.
func checkPromQL(t *testing.T, queries []string) {
	t.Helper()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not installed (Debian package prometheus); the queries are not parsed")
	}
	if len(queries) == 0 {
		t.Fatal("no query to parse")
	}
	type rule struct {
		Record string `json:"record"`
		Expr   string `json:"expr"`
	}
	var rules []rule
	for i, q := range queries {
		rules = append(rules, rule{Record: "autoscaling:query" + strconv.Itoa(i), Expr: q})
	}
	data, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "autoscaling", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "queries.yml")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.CommandContext(t.Context(), promtool, "check", "rules", file).CombinedOutput(); err != nil {
		t.Errorf("promtool check rules: %v\n%s\n%s", err, out, data)
	}
}
