package deploy

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"
)

// This file decodes rendered manifests into their Go types strictly, as the API server's
// strict field validation does: unknown and duplicate fields are errors, and field names
// are case-sensitive. Built-in kinds decode into k8s.io/api; the Prometheus Operator's
// kinds into the small structs below, which declare only the fields the manifests may use,
// and KEDA's ScaledObject into the one of autoscaling_test.go.

// serviceMonitor is the part of monitoring.coreos.com/v1 ServiceMonitor the manifests use.
type serviceMonitor struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            struct {
		JobLabel          string               `json:"jobLabel,omitempty"`
		Selector          metav1.LabelSelector `json:"selector"`
		NamespaceSelector *struct {
			Any        bool     `json:"any,omitempty"`
			MatchNames []string `json:"matchNames,omitempty"`
		} `json:"namespaceSelector,omitempty"`
		Endpoints []struct {
			Port          string       `json:"port"`
			Path          string       `json:"path,omitempty"`
			Scheme        string       `json:"scheme,omitempty"`
			Interval      string       `json:"interval,omitempty"`
			ScrapeTimeout string       `json:"scrapeTimeout,omitempty"`
			Relabelings   []relabeling `json:"relabelings,omitempty"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// relabeling is a Prometheus Operator RelabelConfig.
type relabeling struct {
	Action       string   `json:"action,omitempty"`
	SourceLabels []string `json:"sourceLabels,omitempty"`
	Separator    *string  `json:"separator,omitempty"`
	TargetLabel  string   `json:"targetLabel,omitempty"`
	Regex        string   `json:"regex,omitempty"`
	Replacement  *string  `json:"replacement,omitempty"`
}

// prometheusRule is monitoring.coreos.com/v1 PrometheusRule.
type prometheusRule struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            struct {
		Groups []struct {
			Name     string `json:"name"`
			Interval string `json:"interval,omitempty"`
			Rules    []struct {
				Record        string            `json:"record,omitempty"`
				Alert         string            `json:"alert,omitempty"`
				Expr          string            `json:"expr"`
				For           string            `json:"for,omitempty"`
				KeepFiringFor string            `json:"keep_firing_for,omitempty"`
				Labels        map[string]string `json:"labels,omitempty"`
				Annotations   map[string]string `json:"annotations,omitempty"`
			} `json:"rules"`
		} `json:"groups"`
	} `json:"spec"`
}

// manifests are the objects of one rendering, decoded, by name.
type manifests struct {
	Deployments     map[string]*appsv1.Deployment
	Services        map[string]*corev1.Service
	ConfigMaps      map[string]*corev1.ConfigMap
	CronJobs        map[string]*batchv1.CronJob
	ServiceMonitors map[string]*serviceMonitor
	Rules           map[string]*prometheusRule
	ScaledObjects   map[string]*scaledObject
	HPAs            map[string]*autoscalingv2.HorizontalPodAutoscaler
}

// decodeAll decodes every object strictly into its type; a kind the test does not know is
// an error, so that a new kind comes with its checks.
func decodeAll(objs []object) (*manifests, error) {
	m := &manifests{
		Deployments: map[string]*appsv1.Deployment{}, Services: map[string]*corev1.Service{},
		ConfigMaps: map[string]*corev1.ConfigMap{}, CronJobs: map[string]*batchv1.CronJob{},
		ServiceMonitors: map[string]*serviceMonitor{}, Rules: map[string]*prometheusRule{},
		ScaledObjects: map[string]*scaledObject{}, HPAs: map[string]*autoscalingv2.HorizontalPodAutoscaler{},
	}
	for _, o := range objs {
		var err error
		switch gvk := apiVersionOf(o) + " " + o.kind(); gvk {
		case "apps/v1 Deployment":
			err = decodeInto(o, m.Deployments)
		case "v1 Service":
			err = decodeInto(o, m.Services)
		case "v1 ConfigMap":
			err = decodeInto(o, m.ConfigMaps)
		case "batch/v1 CronJob":
			err = decodeInto(o, m.CronJobs)
		case "monitoring.coreos.com/v1 ServiceMonitor":
			err = decodeInto(o, m.ServiceMonitors)
		case "monitoring.coreos.com/v1 PrometheusRule":
			err = decodeInto(o, m.Rules)
		case "keda.sh/v1alpha1 ScaledObject":
			err = decodeInto(o, m.ScaledObjects)
		case "autoscaling/v2 HorizontalPodAutoscaler":
			err = decodeInto(o, m.HPAs)
		default:
			err = fmt.Errorf("the test knows no %s; add its type and checks", gvk)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", o.id(), err)
		}
	}
	return m, nil
}

func apiVersionOf(o object) string { s, _ := o["apiVersion"].(string); return s }

// decodeInto decodes o strictly into a new T and stores it in m under its name.
func decodeInto[T any](o object, m map[string]*T) error {
	data, err := json.Marshal(o)
	if err != nil {
		return err
	}
	v := new(T)
	if err := strictUnmarshal(data, v); err != nil {
		return err
	}
	if o.name() == "" {
		return errors.New("no metadata.name")
	}
	m[o.name()] = v
	return nil
}

// strictUnmarshal decodes JSON into v, refusing unknown and duplicate fields and names
// that differ from the type's only in case.
func strictUnmarshal(data []byte, v any) error {
	strict, err := kjson.UnmarshalStrict(data, v, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}

func TestStrictDecoding(t *testing.T) {
	for name, tc := range map[string]struct {
		doc  string
		fail bool
	}{
		"valid":         {doc: `{"apiVersion":"v1","kind":"Service","metadata":{"name":"a"},"spec":{"ports":[{"port":80}]}}`},
		"unknown field": {doc: `{"apiVersion":"v1","kind":"Service","metadata":{"name":"a"},"spec":{"prots":[]}}`, fail: true},
		"wrong case":    {doc: `{"apiVersion":"v1","kind":"Service","metadata":{"name":"a"},"spec":{"Ports":[]}}`, fail: true},
		"wrong type":    {doc: `{"apiVersion":"v1","kind":"Service","metadata":{"name":"a"},"spec":{"ports":"80"}}`, fail: true},
		"crd unknown":   {doc: `{"apiVersion":"monitoring.coreos.com/v1","kind":"ServiceMonitor","metadata":{"name":"a"},"spec":{"endpoints":[{"port":"a","source_labels":[]}]}}`, fail: true},
		"unknown kind":  {doc: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"}}`, fail: true},
		"keda":          {doc: `{"apiVersion":"keda.sh/v1alpha1","kind":"ScaledObject","metadata":{"name":"a"},"spec":{"scaleTargetRef":{"name":"d"},"triggers":[{"type":"prometheus","metadata":{"threshold":"1"}}]}}`},
		"keda unknown":  {doc: `{"apiVersion":"keda.sh/v1alpha1","kind":"ScaledObject","metadata":{"name":"a"},"spec":{"scaleTargetRef":{"name":"d"},"minReplicas":1}}`, fail: true},
		"keda number":   {doc: `{"apiVersion":"keda.sh/v1alpha1","kind":"ScaledObject","metadata":{"name":"a"},"spec":{"triggers":[{"type":"prometheus","metadata":{"threshold":1}}]}}`, fail: true},
		"hpa unknown":   {doc: `{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","metadata":{"name":"a"},"spec":{"maxReplicas":2,"targetCPUUtilizationPercentage":50}}`, fail: true},
		"no name":       {doc: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{}}`, fail: true},
	} {
		t.Run(name, func(t *testing.T) {
			objs, err := parseObjects([]byte(tc.doc))
			if err != nil {
				t.Fatal(err)
			}
			_, err = decodeAll(objs)
			if (err != nil) != tc.fail {
				t.Fatalf("decodeAll: %v, want failure %v", err, tc.fail)
			}
		})
	}
}

// renderings returns each rendering of dir to check: the test's own, and kubectl's where
// kubectl is installed (whose env order, for one, the test's does not reproduce).
func renderings(t *testing.T, dir string) map[string]*manifests {
	t.Helper()
	ours, err := render(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*manifests{}
	if out["test"], err = decodeAll(ours); err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	if theirs, ok := kubectlRender(t, dir); ok {
		if out["kubectl"], err = decodeAll(theirs); err != nil {
			t.Fatalf("%s, rendered by kubectl: %v", dir, err)
		}
	}
	return out
}

func TestPrometheusRules(t *testing.T) {
	for by, m := range renderings(t, ".") {
		t.Run(by, func(t *testing.T) {
			if len(m.Rules) != 1 || len(m.Deployments)+len(m.Services)+len(m.ServiceMonitors) != 0 {
				t.Fatalf("deploy/ renders %d PrometheusRules and other objects; want the rules alone", len(m.Rules))
			}
			for name, r := range m.Rules {
				n := 0
				for _, g := range r.Spec.Groups {
					for _, rule := range g.Rules {
						n++
						if (rule.Record == "") == (rule.Alert == "") || rule.Expr == "" {
							t.Errorf("%s: group %s: a rule needs an expr and one of record or alert: %+v", name, g.Name, rule)
						}
					}
				}
				if n == 0 {
					t.Errorf("%s has no rules", name)
				}
			}
		})
	}
}
