package deploy

import (
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// This file checks how the objects of a rendering refer to each other: Services to the
// pod's ports, the ServiceMonitor to the admin Service, the CronJob to the data Service.

// TestManifests renders the base and each overlay, decodes every object strictly and
// checks it against slogate and the rest of the rendering.
func TestManifests(t *testing.T) {
	settings := serveSettings(t)
	for _, k := range kustomizations {
		if k.engine == "" {
			continue
		}
		t.Run(k.dir, func(t *testing.T) {
			for by, m := range renderings(t, k.dir) {
				t.Run(by, func(t *testing.T) {
					p := newPod(t, m, settings)
					checkEnv(t, "Deployment/"+p.dep.Name, p.spec, settings)
					p.checkPorts()
					p.checkProbes()
					p.checkSettings(k.engine)
					p.checkSLOs()
					p.checkUpstream(k.engine)
					p.checkShutdown()
					p.checkTiers()
					p.checkHistory()
					checkSecurity(t, "Deployment/"+p.dep.Name, p.slogate)
					p.checkResources(k.gpu)
					if k.gpu && !strings.Contains(p.engine.Image, k.engine) {
						t.Errorf("the engine's image %s is not %s's", p.engine.Image, k.engine)
					}
					p.checkServices()
					p.checkServiceMonitor()
					p.checkCronJobs(settings)
				})
			}
		})
	}
}

// selects reports whether a label selector (matchLabels) selects the labels.
func selects(selector map[string]string, set map[string]string) bool {
	return len(selector) > 0 && labels.SelectorFromSet(selector).Matches(labels.Set(set))
}

// servicePorts returns the container ports a Service's ports lead to in slogate's
// container, by Service port name; a target that is no slogate port is an error.
func (p *pod) servicePorts(svc *corev1.Service) map[string]int32 {
	out := map[string]int32{}
	for _, sp := range svc.Spec.Ports {
		target := sp.TargetPort
		if target.IntVal == 0 && target.StrVal == "" {
			target.IntVal = sp.Port // an unset targetPort is the port
		}
		n, ok := resolve(p.slogate, target)
		if !ok || !slices.ContainsFunc(p.slogate.Ports, func(cp corev1.ContainerPort) bool { return cp.ContainerPort == n }) {
			p.t.Errorf("Service %s port %s leads to %s, which is no port of slogate's container", svc.Name, sp.Name, target.String())
		}
		out[sp.Name] = n
	}
	return out
}

// checkServices checks that clients' Services lead to slogate's data port only, and that
// the admin port has a Service of its own.
func (p *pod) checkServices() {
	tmpl := p.dep.Spec.Template.Labels
	if p.dep.Spec.Selector == nil || !selects(p.dep.Spec.Selector.MatchLabels, tmpl) {
		p.t.Errorf("the Deployment's selector does not select its own pods")
	}
	data, admin := p.dataPort().ContainerPort, p.adminPort().ContainerPort
	var clients, admins int
	for _, svc := range p.m.Services {
		if !selects(svc.Spec.Selector, tmpl) {
			p.t.Errorf("Service %s selects %v, not the pod (%v)", svc.Name, svc.Spec.Selector, tmpl)
			continue
		}
		targets := p.servicePorts(svc)
		hasData := slices.ContainsFunc(mapValues(targets), func(n int32) bool { return n == data })
		hasAdmin := slices.ContainsFunc(mapValues(targets), func(n int32) bool { return n == admin })
		switch {
		case hasData && hasAdmin:
			p.t.Errorf("Service %s exposes both the data and the admin port; keep the admin endpoints off clients' Service", svc.Name)
		case hasData:
			clients++
		case hasAdmin:
			admins++
		}
	}
	if clients != 1 || admins != 1 {
		p.t.Errorf("%d Services lead to slogate's data port and %d to its admin port; want one each", clients, admins)
	}
}

func mapValues[K comparable, V any](m map[K]V) []V {
	out := make([]V, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// checkServiceMonitor checks that the ServiceMonitor scrapes /metrics on the admin port
// of the admin Service only, with the labels the dashboards and rules use.
func (p *pod) checkServiceMonitor() {
	if len(p.m.ServiceMonitors) != 1 {
		p.t.Fatalf("%d ServiceMonitors; want 1", len(p.m.ServiceMonitors))
	}
	admin := p.adminPort().ContainerPort
	for name, sm := range p.m.ServiceMonitors {
		sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
		if err != nil || sel.Empty() || sm.Spec.NamespaceSelector != nil {
			p.t.Errorf("ServiceMonitor %s: selector %+v (%v); want labels of the admin Service, in its own namespace", name, sm.Spec.Selector, err)
			continue
		}
		var matched []*corev1.Service
		for _, svc := range p.m.Services {
			if sel.Matches(labels.Set(svc.Labels)) {
				matched = append(matched, svc)
			}
		}
		if len(matched) != 1 {
			p.t.Fatalf("ServiceMonitor %s selects %d Services; want the admin Service alone", name, len(matched))
		}
		svc := matched[0]
		if job := svc.Labels[sm.Spec.JobLabel]; job != "slogate" {
			p.t.Errorf("ServiceMonitor %s: jobLabel %q gives job %q; the rules and their tests expect job \"slogate\"", name, sm.Spec.JobLabel, job)
		}
		if len(sm.Spec.Endpoints) != 1 {
			p.t.Fatalf("ServiceMonitor %s: %d endpoints; want 1", name, len(sm.Spec.Endpoints))
		}
		ep := sm.Spec.Endpoints[0]
		if n, ok := p.servicePorts(svc)[ep.Port]; !ok || n != admin {
			p.t.Errorf("ServiceMonitor %s scrapes port %q of Service %s; want the port leading to slogate's admin port %d", name, ep.Port, svc.Name, admin)
		}
		if ep.Path != "/metrics" {
			p.t.Errorf("ServiceMonitor %s scrapes %q; want /metrics", name, ep.Path)
		}
		for target, source := range map[string]string{"namespace": "__meta_kubernetes_namespace", "pod": "__meta_kubernetes_pod_name"} {
			if !slices.ContainsFunc(ep.Relabelings, func(r relabeling) bool {
				return r.TargetLabel == target && slices.Equal(r.SourceLabels, []string{source}) && (r.Action == "" || r.Action == "replace")
			}) {
				p.t.Errorf("ServiceMonitor %s: no relabeling sets %s from %s (the dashboards filter by it)", name, target, source)
			}
		}
	}
}

// checkCronJobs checks the probe CronJob: slogate's image, non-root, and an --upstream that
// is the data Service's address.
func (p *pod) checkCronJobs(settings map[string]setting) {
	if len(p.m.CronJobs) == 0 {
		p.t.Error("no probe CronJob")
	}
	for name, cj := range p.m.CronJobs {
		spec := &cj.Spec.JobTemplate.Spec.Template.Spec
		where := "CronJob/" + name
		checkEnv(p.t, where, spec, settings)
		if cj.Spec.ConcurrencyPolicy != "Forbid" {
			p.t.Errorf("%s: concurrencyPolicy %q; want Forbid (probes must not overlap)", where, cj.Spec.ConcurrencyPolicy)
		}
		for i := range spec.Containers {
			c := &spec.Containers[i]
			if c.Image != p.slogate.Image || !slices.Equal(c.Command, []string{"/slogate", "probe"}) {
				p.t.Errorf("%s/%s: %s %v; want slogate's image (%s) running /slogate probe", where, c.Name, c.Image, c.Command, p.slogate.Image)
				continue
			}
			checkSecurity(p.t, where, c)
			p.checkProbeTarget(where, engineFlags(c)["--upstream"])
		}
	}
}

// checkProbeTarget checks that a probe's --upstream is http://SERVICE:PORT of the data port.
func (p *pod) checkProbeTarget(where, target string) {
	u, err := url.Parse(target)
	if err != nil || u.Scheme != "http" {
		p.t.Errorf("%s: --upstream %q; want http://SERVICE:PORT", where, target)
		return
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "80"
	}
	svc, ok := p.m.Services[strings.Split(host, ".")[0]]
	if !ok || net.ParseIP(host) != nil {
		p.t.Errorf("%s: --upstream %s is not a Service of the rendering", where, target)
		return
	}
	i := slices.IndexFunc(svc.Spec.Ports, func(sp corev1.ServicePort) bool { return strconv.Itoa(int(sp.Port)) == port })
	if i < 0 || p.servicePorts(svc)[svc.Spec.Ports[i].Name] != p.dataPort().ContainerPort {
		p.t.Errorf("%s: --upstream %s does not lead to slogate's data port", where, target)
	}
}

// sloMetrics are the histograms whose bucket boundary on each SLO the rules count with.
var sloMetrics = map[string]string{
	"SLOGATE_SLO_TTFT": "slogate_time_to_first_token_seconds",
	"SLOGATE_SLO_TPOT": "slogate_time_per_output_token_seconds",
}

// checkSLOs checks that slogate's SLOs are the thresholds of the rules in
// prometheusrule.yaml (the le matchers of the SLO recording rules): a deployment that
// changes an SLO must regenerate the rules with it (alerts/).
func (p *pod) checkSLOs() {
	rules, err := os.ReadFile("prometheusrule.yaml")
	if err != nil {
		p.t.Fatal(err)
	}
	for env, metric := range sloMetrics {
		slo, err := time.ParseDuration(p.env(env))
		if err != nil {
			p.t.Fatalf("%s: %v", env, err)
		}
		le := regexp.MustCompile(regexp.QuoteMeta(metric) + `_bucket\{le=~?"([0-9]+(?:\.[0-9]+)?)`)
		found := le.FindAllStringSubmatch(string(rules), -1)
		if len(found) == 0 {
			p.t.Errorf("prometheusrule.yaml has no le matcher on %s_bucket; teach checkSLOs the rules' new form", metric)
		}
		for _, f := range found {
			if v, err := strconv.ParseFloat(f[1], 64); err != nil || time.Duration(v*float64(time.Second)) != slo {
				p.t.Errorf("%s=%s, but the rules count %s against le=%s: regenerate them with the SLO (alerts/)", env, slo, metric, f[1])
			}
		}
	}
}
