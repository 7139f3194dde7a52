package deploy

import (
	"net"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slogate/slogate/admission"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// This file checks the pod of a rendering against slogate: ports, probes, environment,
// the engine's address, the shutdown timing, the tiers file, security and resources.

// shutdownMargin is the least time the grace period must leave after the last preStop
// sleep and after slogate's drain, for the processes to exit.
const shutdownMargin = 5 * time.Second

// pod is the Deployment of a rendering with its two containers and slogate's settings.
type pod struct {
	t        *testing.T
	m        *manifests
	settings map[string]setting
	dep      *appsv1.Deployment
	spec     *corev1.PodSpec
	slogate  *corev1.Container
	engine   *corev1.Container
}

// newPod finds the one Deployment and its containers "slogate" and "engine".
func newPod(t *testing.T, m *manifests, settings map[string]setting) *pod {
	t.Helper()
	if len(m.Deployments) != 1 {
		t.Fatalf("%d Deployments; want 1", len(m.Deployments))
	}
	p := &pod{t: t, m: m, settings: settings}
	for _, d := range m.Deployments {
		p.dep, p.spec = d, &d.Spec.Template.Spec
	}
	for i := range p.spec.Containers {
		switch c := &p.spec.Containers[i]; c.Name {
		case "slogate":
			p.slogate = c
		case "engine":
			p.engine = c
		}
	}
	if p.slogate == nil || p.engine == nil || len(p.spec.Containers) != 2 {
		t.Fatalf("the pod's containers are %v; want slogate and engine", containerNames(p.spec))
	}
	return p
}

func containerNames(s *corev1.PodSpec) []string {
	var out []string
	for _, c := range s.Containers {
		out = append(out, c.Name)
	}
	return out
}

// env returns slogate's value of a setting: from the container, else its default.
func (p *pod) env(name string) string {
	for _, e := range p.slogate.Env {
		if e.Name == name {
			return e.Value
		}
	}
	s, ok := p.settings[name]
	if !ok {
		p.t.Fatalf("no setting %s", name)
	}
	return s.Default
}

// explicit reports whether slogate's container sets the variable itself.
func (p *pod) explicit(name string) bool {
	return slices.ContainsFunc(p.slogate.Env, func(e corev1.EnvVar) bool { return e.Name == name })
}

// dataPort and adminPort are slogate's container ports of its two listeners.
func (p *pod) dataPort() corev1.ContainerPort  { return p.portAt(p.env("SLOGATE_LISTEN")) }
func (p *pod) adminPort() corev1.ContainerPort { return p.portAt(p.env("SLOGATE_ADMIN_LISTEN")) }

func (p *pod) portAt(addr string) corev1.ContainerPort {
	n := listenPort(p.t, addr)
	for _, cp := range p.slogate.Ports {
		if int(cp.ContainerPort) == n {
			return cp
		}
	}
	p.t.Fatalf("slogate listens on %s, but its container declares no port %d", addr, n)
	return corev1.ContainerPort{}
}

// resolve returns the number of a container port given by name or number.
func resolve(c *corev1.Container, port intstr.IntOrString) (int32, bool) {
	if port.Type == intstr.Int {
		return port.IntVal, true
	}
	for _, cp := range c.Ports {
		if cp.Name == port.StrVal {
			return cp.ContainerPort, true
		}
	}
	return 0, false
}

func (p *pod) checkPorts() {
	data, admin := p.dataPort(), p.adminPort()
	if data.Name == "" || admin.Name == "" {
		p.t.Errorf("slogate's ports must be named (Services and probes refer to them): %+v", p.slogate.Ports)
	}
	if len(p.engine.Ports) != 0 {
		p.t.Errorf("the engine declares ports %+v; it listens on 127.0.0.1 only", p.engine.Ports)
	}
}

func (p *pod) checkProbes() {
	admin := p.adminPort().ContainerPort
	for _, pr := range []struct {
		kind, path string
		probe      *corev1.Probe
	}{{"liveness", "/healthz", p.slogate.LivenessProbe}, {"readiness", "/readyz", p.slogate.ReadinessProbe}} {
		if pr.probe == nil || pr.probe.HTTPGet == nil {
			p.t.Errorf("slogate needs an HTTP %s probe on %s", pr.kind, pr.path)
			continue
		}
		n, ok := resolve(p.slogate, pr.probe.HTTPGet.Port)
		if pr.probe.HTTPGet.Path != pr.path || !ok || n != admin {
			p.t.Errorf("slogate's %s probe is %s on port %s; want %s on the admin port %d", pr.kind, pr.probe.HTTPGet.Path, pr.probe.HTTPGet.Port.String(), pr.path, admin)
		}
	}
	// The kubelet probes the pod's IP, where a localhost-bound engine does not listen.
	for _, probe := range []*corev1.Probe{p.engine.LivenessProbe, p.engine.ReadinessProbe, p.engine.StartupProbe} {
		if probe != nil && (probe.HTTPGet != nil || probe.TCPSocket != nil || probe.GRPC != nil) {
			p.t.Errorf("the engine has a network probe %+v; it listens on 127.0.0.1, which the kubelet cannot reach", probe.ProbeHandler)
		}
	}
}

// varRef matches a $(VAR) reference in an env value.
var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// checkEnv checks the variables of every container of spec: SLOGATE_* are settings slogate
// reads, with values of the setting's type; $(VAR) refers to a variable defined above it
// (Kubernetes expands nothing else); no variable is set twice.
func checkEnv(t *testing.T, where string, spec *corev1.PodSpec, settings map[string]setting) {
	t.Helper()
	for _, c := range spec.Containers {
		defined := map[string]bool{}
		for _, e := range c.Env {
			if defined[e.Name] {
				t.Errorf("%s/%s: %s is set twice", where, c.Name, e.Name)
			}
			for _, ref := range varRef.FindAllStringSubmatch(e.Value, -1) {
				if !defined[ref[1]] {
					t.Errorf("%s/%s: %s refers to $(%s), which is not defined above it", where, c.Name, e.Name, ref[1])
				}
			}
			defined[e.Name] = true
			if !strings.HasPrefix(e.Name, "SLOGATE_") {
				continue
			}
			s, ok := settings[e.Name]
			if !ok {
				t.Errorf("%s/%s: slogate reads no %s (%s)", where, c.Name, e.Name, serveSchema)
				continue
			}
			if e.ValueFrom == nil && !varRef.MatchString(e.Value) {
				if err := checkValue(s.Type, e.Value); err != nil {
					t.Errorf("%s/%s: %s=%q: %v", where, c.Name, e.Name, e.Value, err)
				}
			}
		}
	}
}

// checkSettings checks slogate's own settings against each other and the rest of the pod.
func (p *pod) checkSettings(engine string) {
	for _, name := range []string{"SLOGATE_UPSTREAM", "SLOGATE_LISTEN", "SLOGATE_ADMIN_LISTEN", "SLOGATE_ENGINE", "SLOGATE_DRAIN_TIMEOUT", "SLOGATE_TIERS_FILE", "SLOGATE_DCGM"} {
		if !p.explicit(name) {
			p.t.Errorf("slogate's container should set %s explicitly", name)
		}
	}
	if got := p.env("SLOGATE_ENGINE"); got != engine {
		p.t.Errorf("SLOGATE_ENGINE=%s; want %s", got, engine)
	}
	if dcgm := p.env("SLOGATE_DCGM"); strings.Contains(dcgm, "$(NODE_IP)") {
		ok := slices.ContainsFunc(p.slogate.Env, func(e corev1.EnvVar) bool {
			return e.Name == "NODE_IP" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.hostIP"
		})
		if !ok {
			p.t.Errorf("SLOGATE_DCGM=%s needs NODE_IP from the downward API (status.hostIP)", dcgm)
		}
	}
}

// engineFlags returns the flags of the engine's command line: --name value, --name=value,
// and --name alone (as "").
func engineFlags(c *corev1.Container) map[string]string {
	args := append(slices.Clone(c.Command), c.Args...)
	flags := map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "--") {
			continue
		}
		if name, v, ok := strings.Cut(a, "="); ok {
			flags[name] = v
		} else if i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			flags[a] = args[i+1]
			i++
		} else {
			flags[a] = ""
		}
	}
	return flags
}

// checkUpstream checks that the engine listens on loopback at SLOGATE_UPSTREAM's port and
// is the engine slogate is told it is.
func (p *pod) checkUpstream(engine string) {
	u, err := url.Parse(p.env("SLOGATE_UPSTREAM"))
	if err != nil || u.Port() == "" {
		p.t.Fatalf("SLOGATE_UPSTREAM=%q: want http://127.0.0.1:PORT", p.env("SLOGATE_UPSTREAM"))
	}
	if ip := net.ParseIP(u.Hostname()); ip == nil || !ip.IsLoopback() {
		p.t.Errorf("SLOGATE_UPSTREAM=%s: the engine must be reached on loopback", u)
	}
	flags := engineFlags(p.engine)
	host, port := flags["--host"], flags["--port"]
	if listen, ok := flags["--listen"]; ok { // slogate sim
		host, port, _ = net.SplitHostPort(listen)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		p.t.Errorf("the engine listens on host %q; want 127.0.0.1 (only slogate may reach it)", host)
	}
	if port != u.Port() {
		p.t.Errorf("the engine listens on port %q, but SLOGATE_UPSTREAM is %s", port, u)
	}
	cmd := strings.Join(append(slices.Clone(p.engine.Command), p.engine.Args...), " ")
	switch {
	case strings.HasPrefix(cmd, "/slogate sim"):
		if flags["--flavor"] != engine {
			p.t.Errorf("the simulator's --flavor is %q; want %q like SLOGATE_ENGINE", flags["--flavor"], engine)
		}
	case strings.Contains(cmd, "sglang.launch_server"):
		if _, ok := flags["--enable-metrics"]; !ok || engine != "sglang" {
			p.t.Errorf("SGLang needs --enable-metrics (slogate reads its /metrics) and SLOGATE_ENGINE=sglang: %s", cmd)
		}
	case strings.HasPrefix(cmd, "vllm serve"):
		if engine != "vllm" {
			p.t.Errorf("vLLM behind SLOGATE_ENGINE=%s", engine)
		}
	default:
		p.t.Errorf("the test does not know the engine command %q", cmd)
	}
}

// preStopSeconds returns how long a container's preStop hook sleeps.
func preStopSeconds(c *corev1.Container) time.Duration {
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil {
		return 0
	}
	h := c.Lifecycle.PreStop
	if h.Sleep != nil {
		return time.Duration(h.Sleep.Seconds) * time.Second
	}
	if h.Exec != nil {
		words := strings.Fields(strings.Join(h.Exec.Command, " "))
		if i := slices.IndexFunc(words, func(w string) bool { return path.Base(w) == "sleep" }); i >= 0 && i+1 < len(words) {
			if n, err := strconv.Atoi(words[i+1]); err == nil {
				return time.Duration(n) * time.Second
			}
		}
	}
	return 0
}

// checkShutdown checks the order of a pod's termination: slogate drains after its preStop
// sleep, the engine outlives the drain, and the grace period covers both.
func (p *pod) checkShutdown() {
	drain, err := time.ParseDuration(p.env("SLOGATE_DRAIN_TIMEOUT"))
	if err != nil {
		p.t.Fatal(err)
	}
	grace := 30 * time.Second
	if s := p.spec.TerminationGracePeriodSeconds; s != nil {
		grace = time.Duration(*s) * time.Second
	}
	pre, enginePre := preStopSeconds(p.slogate), preStopSeconds(p.engine)
	if pre <= 0 {
		p.t.Errorf("slogate needs a preStop sleep, so that the pod leaves the endpoints before slogate stops listening")
	}
	if grace < pre+drain+shutdownMargin {
		p.t.Errorf("terminationGracePeriodSeconds %s < slogate's preStop %s + drain timeout %s + %s", grace, pre, drain, shutdownMargin)
	}
	if enginePre < pre+drain {
		p.t.Errorf("the engine's preStop sleep %s ends before slogate's drain (%s + %s): streams would be cut", enginePre, pre, drain)
	}
	if grace < enginePre+shutdownMargin {
		p.t.Errorf("terminationGracePeriodSeconds %s leaves the engine under %s after its preStop sleep %s", grace, shutdownMargin, enginePre)
	}
}

// checkTiers checks that SLOGATE_TIERS_FILE is a key of a ConfigMap mounted as a
// directory (subPath mounts never update), and that it is a valid tiers file.
func (p *pod) checkTiers() {
	file := p.env("SLOGATE_TIERS_FILE")
	dir, key := path.Split(file)
	dir = path.Clean(dir)
	i := slices.IndexFunc(p.slogate.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == dir })
	if i < 0 {
		p.t.Fatalf("SLOGATE_TIERS_FILE=%s, but nothing is mounted at %s", file, dir)
	}
	mount := p.slogate.VolumeMounts[i]
	if mount.SubPath != "" || mount.SubPathExpr != "" || !mount.ReadOnly {
		p.t.Errorf("the tiers mount %+v must be read-only and without subPath (a subPath mount never sees ConfigMap updates)", mount)
	}
	v := slices.IndexFunc(p.spec.Volumes, func(v corev1.Volume) bool { return v.Name == mount.Name })
	if v < 0 || p.spec.Volumes[v].ConfigMap == nil || len(p.spec.Volumes[v].ConfigMap.Items) != 0 {
		p.t.Fatalf("the tiers volume %q must be a whole ConfigMap", mount.Name)
	}
	cm, ok := p.m.ConfigMaps[p.spec.Volumes[v].ConfigMap.Name]
	if !ok {
		p.t.Fatalf("no ConfigMap %s in the rendering", p.spec.Volumes[v].ConfigMap.Name)
	}
	data, ok := cm.Data[key]
	if !ok {
		p.t.Fatalf("ConfigMap %s has no key %s", cm.Name, key)
	}
	if _, err := admission.ParseConfig([]byte(data)); err != nil {
		p.t.Errorf("ConfigMap %s, %s: %v", cm.Name, key, err)
	}
	// The commented tenants section shows the shape of one: uncommented, it is valid too.
	example, ok := uncomment(data, "# tenants:")
	if !ok {
		p.t.Fatalf("ConfigMap %s, %s: no commented tenants section (a line %q)", cm.Name, key, "# tenants:")
	}
	cfg, err := admission.ParseConfig([]byte(example))
	switch {
	case err != nil:
		p.t.Errorf("ConfigMap %s, %s, its tenants section uncommented: %v", cm.Name, key, err)
	case cfg.Tenants == nil || len(cfg.Tenants.Named) == 0 || cfg.Tenants.Identify.None():
		p.t.Errorf("ConfigMap %s, %s: the tenants section uncommented names no tenants or no identify rule: %+v", cm.Name, key, cfg.Tenants)
	}
}

// uncomment returns text with the comment block that starts at the line start — that
// line and the comment lines after it — uncommented (their "# " or "#" taken off), and
// whether there is such a line.
func uncomment(text, start string) (string, bool) {
	lines := strings.Split(text, "\n")
	i := slices.Index(lines, start)
	if i < 0 {
		return text, false
	}
	for ; i < len(lines) && strings.HasPrefix(lines[i], "#"); i++ {
		lines[i] = strings.TrimPrefix(strings.TrimPrefix(lines[i], "#"), " ")
	}
	return strings.Join(lines, "\n"), true
}

// checkHistory checks that SLOGATE_PROBE_HISTORY_DIR, where set, is a writable volume
// of its own (the root filesystem is read-only) large enough for
// SLOGATE_PROBE_HISTORY_BYTES where the volume is a size-limited emptyDir.
func (p *pod) checkHistory() {
	dir := p.env("SLOGATE_PROBE_HISTORY_DIR")
	if dir == "" {
		return
	}
	i := slices.IndexFunc(p.slogate.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == path.Clean(dir) })
	if i < 0 {
		p.t.Fatalf("SLOGATE_PROBE_HISTORY_DIR=%s, but nothing is mounted there (the root filesystem is read-only)", dir)
	}
	mount := p.slogate.VolumeMounts[i]
	if mount.ReadOnly {
		p.t.Errorf("the probe history mount %s is read-only", mount.Name)
	}
	v := slices.IndexFunc(p.spec.Volumes, func(v corev1.Volume) bool { return v.Name == mount.Name })
	if v < 0 {
		p.t.Fatalf("no volume %q for the probe history", mount.Name)
	}
	if ed := p.spec.Volumes[v].EmptyDir; ed != nil && ed.SizeLimit != nil {
		want, err := strconv.ParseInt(p.env("SLOGATE_PROBE_HISTORY_BYTES"), 10, 64)
		if err != nil {
			p.t.Fatalf("SLOGATE_PROBE_HISTORY_BYTES: %v", err)
		}
		if ed.SizeLimit.Value() < want {
			p.t.Errorf("the probe history emptyDir holds %s, less than SLOGATE_PROBE_HISTORY_BYTES=%d", ed.SizeLimit, want)
		}
	}
}

// checkSecurity checks that a container runs as non-root with nothing to escalate to.
func checkSecurity(t *testing.T, where string, c *corev1.Container) {
	t.Helper()
	sc := c.SecurityContext
	switch {
	case sc == nil:
		t.Errorf("%s/%s has no securityContext", where, c.Name)
	case sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot, sc.RunAsUser != nil && *sc.RunAsUser == 0:
		t.Errorf("%s/%s must run as non-root", where, c.Name)
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Errorf("%s/%s needs readOnlyRootFilesystem", where, c.Name)
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Errorf("%s/%s needs allowPrivilegeEscalation: false", where, c.Name)
	case sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) != 0:
		t.Errorf("%s/%s must drop ALL capabilities and add none", where, c.Name)
	}
}

// checkResources checks slogate's requests and limits, and the engine's GPU.
func (p *pod) checkResources(gpu bool) {
	r := p.slogate.Resources
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, hasReq := r.Requests[name]
		lim, hasLim := r.Limits[name]
		if !hasReq || !hasLim || lim.Cmp(req) < 0 {
			p.t.Errorf("slogate's %s: request %v and limit %v; want both, limit >= request", name, req.String(), lim.String())
		}
	}
	const gpuName = corev1.ResourceName("nvidia.com/gpu")
	lim, has := p.engine.Resources.Limits[gpuName]
	if has != gpu || gpu && lim.Value() < 1 {
		p.t.Errorf("the engine's GPU limit is %v; want a GPU: %v", lim.String(), gpu)
	}
	if req, ok := p.engine.Resources.Requests[gpuName]; ok && req.Cmp(lim) != 0 {
		p.t.Errorf("the engine's GPU request %v differs from its limit %v", req.String(), lim.String())
	}
}
