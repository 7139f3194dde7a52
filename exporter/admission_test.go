package exporter

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/clock"
	"github.com/slogate/slogate/engine"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/wire"
)

// decisionRelay forwards decisions to Metrics created after the controller, as
// slogate serve's late binding does.
type decisionRelay struct{ m *Metrics }

func (r *decisionRelay) ObserveDecision(d admission.Decision) {
	if r.m != nil {
		r.m.ObserveDecision(d)
	}
}

// tiersConfig is the built-in tiers with a rate limit on "short" and SLO feedback after
// two observations.
func tiersConfig() admission.Config {
	cfg := admission.DefaultConfig()
	cfg.Tiers[0].Rate, cfg.Tiers[0].Burst = 50, 10
	cfg.Tiers[3].MaxPrefillTokens = 200000 // four xlongPrompts
	cfg.Feedback.MinSamples = 2
	return cfg
}

// newController returns a controller of tiersConfig in mode, on clock, with SLOs of 2 s
// (TTFT) and 100 ms (TPOT); opts adds the engine, observers and saturation policy.
func newController(t testing.TB, mode admission.Mode, clk *clock.Fake, opts admission.Options) *admission.Controller {
	t.Helper()
	opts.Mode, opts.Clock = mode, clk
	opts.SLO = measure.NewSLO(2*time.Second, 100*time.Millisecond)
	c, err := admission.New(tiersConfig(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Tiers files for the reload tests.
const (
	validTiers = `tiers:
  - name: short
    max_input_tokens: 4096
    max_in_flight: 16
    max_queue: 32
    max_queue_wait: 2s
  - name: long
    max_in_flight: 4
`
	invalidTiers = "tiers:\n  - name: short\n    max_in_flight: 0\n"
)

// writeTiers writes a tiers file into dir and returns its path.
func writeTiers(t testing.TB, dir, content string) string {
	t.Helper()
	path := filepath.Join(dir, "tiers.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Prompts that fall into the built-in tiers "short" and "xlong".
var (
	shortPrompt = wire.PromptSize{TokenIDs: 100, Prompts: 1}
	xlongPrompt = wire.PromptSize{TokenIDs: 50000, Prompts: 1}
)

// okStream is the result of a stream that ended ok with a TTFT of 500 ms and a TPOT of
// 20 ms.
var okStream = measure.Result{Route: wire.RouteChatCompletions, Stream: true, Status: 200, Outcome: measure.OK,
	TTFT: 500 * time.Millisecond, TPOT: 20 * time.Millisecond, E2E: 2500 * time.Millisecond, OutputChunks: 101}

// admit admits a request or fails the test.
func admit(t testing.TB, c *admission.Controller, p wire.PromptSize, class admission.Class) *admission.Ticket {
	t.Helper()
	tk, err := c.Admit(context.Background(), admission.Request{Model: "llama", Prompt: p, Class: class, Stream: true})
	if err != nil {
		t.Fatalf("Admit: %v", err)
	}
	return tk
}

// exercise gives ctrl's "short" tier history: two streams admitted now and finished one
// and two seconds later, then a feedback round, so the observed p95s (500 ms, 20 ms) and
// the service rate are known.
func exercise(t testing.TB, ctrl *admission.Controller, clk *clock.Fake) {
	t.Helper()
	a := admit(t, ctrl, shortPrompt, admission.Interactive)
	b := admit(t, ctrl, shortPrompt, admission.Interactive)
	start := clk.Now()
	clk.SetTime(start.Add(time.Second))
	a.Done(okStream)
	clk.SetTime(start.Add(2 * time.Second))
	b.Done(okStream)
	ctrl.Tick()
}

// tierWant is what the gauges of one built-in tier should say.
type tierWant struct {
	name                   string
	inFlight, limit, min   float64
	max, queueLimit, waitS float64
	queued                 [3]float64 // interactive, batch, probe
	rate, p95TTFT, p95TPOT float64    // 0: absent
	serviceRate, maxInput  float64    // 0: absent
	ttftSLO, tpotSLO       float64
	offered                float64 // always exported
	sustainable            float64 // 0: absent, and so is the demand ratio
	prefill                float64 // always exported
	prefillLimit           float64 // 0: absent
}

// add puts the tier's samples into want.
func (w tierWant) add(want map[string]float64) {
	tl := `{tier="` + w.name + `"}`
	want["slogate_admission_offered_rate"+tl] = w.offered
	want["slogate_admission_prefill_tokens"+tl] = w.prefill
	if w.sustainable > 0 {
		want["slogate_admission_sustainable_rate"+tl] = w.sustainable
		want["slogate_admission_demand_ratio"+tl] = w.offered / w.sustainable
	}
	want["slogate_admission_inflight_requests"+tl] = w.inFlight
	want["slogate_admission_inflight_limit"+tl] = w.limit
	want["slogate_admission_inflight_limit_min"+tl] = w.min
	want["slogate_admission_inflight_limit_max"+tl] = w.max
	want["slogate_admission_queue_limit"+tl] = w.queueLimit
	want["slogate_admission_queue_wait_limit_seconds"+tl] = w.waitS
	for i, class := range []string{"interactive", "batch", "probe"} {
		want[`slogate_admission_queue_length{class="`+class+`",tier="`+w.name+`"}`] = w.queued[i]
	}
	for _, s := range []struct {
		slo         string
		target, p95 float64
	}{{"ttft", w.ttftSLO, w.p95TTFT}, {"tpot", w.tpotSLO, w.p95TPOT}} {
		want[`slogate_admission_slo_seconds{slo="`+s.slo+`",tier="`+w.name+`"}`] = s.target
		if s.p95 > 0 {
			want[`slogate_admission_observed_p95_seconds{slo="`+s.slo+`",tier="`+w.name+`"}`] = s.p95
		}
	}
	for name, v := range map[string]float64{
		"slogate_admission_rate_limit": w.rate, "slogate_admission_service_rate": w.serviceRate,
		"slogate_admission_tier_max_input_tokens": w.maxInput, "slogate_admission_prefill_limit_tokens": w.prefillLimit,
	} {
		if v > 0 {
			want[name+tl] = v
		}
	}
}

// builtinTiers returns the idle state of tiersConfig's tiers.
func builtinTiers() []tierWant {
	return []tierWant{
		{name: "short", limit: 64, min: 1, max: 64, queueLimit: 128, waitS: 1, rate: 50, maxInput: 2048, ttftSLO: 2, tpotSLO: 0.1},
		{name: "medium", limit: 32, min: 1, max: 32, queueLimit: 64, waitS: 1, maxInput: 8192, ttftSLO: 2, tpotSLO: 0.1},
		{name: "long", limit: 4, min: 1, max: 4, queueLimit: 8, waitS: 1, maxInput: 32768, ttftSLO: 2, tpotSLO: 0.1},
		{name: "xlong", limit: 2, min: 1, max: 2, queueLimit: 4, waitS: 1, ttftSLO: 2, tpotSLO: 0.1, prefillLimit: 200000},
	}
}

// wantAdmission returns every admission gauge sample for mode, engine state and tiers.
func wantAdmission(mode, state string, tiers []tierWant) map[string]float64 {
	want := map[string]float64{}
	for _, m := range []string{"off", "shadow", "enforce"} {
		want[`slogate_admission_mode{mode="`+m+`"}`] = boolValue(m == mode)
	}
	if mode == "off" {
		return want
	}
	for _, s := range []string{"ok", "saturated", "engine-down"} {
		want[`slogate_admission_engine_state{state="`+s+`"}`] = boolValue(s == state)
	}
	for _, tw := range tiers {
		tw.add(want)
	}
	return want
}

// admissionGauges returns the admission gauges reg exports (not the decision counter).
func admissionGauges(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	got := samples(t, reg, "slogate_admission_")
	for k := range got {
		if strings.HasPrefix(k, "slogate_admission_decisions_total") || strings.HasPrefix(k, "slogate_admission_config_") {
			delete(got, k)
		}
	}
	return got
}

// checkExactly reports every difference between got and want, extra keys included.
func checkExactly(t *testing.T, got, want map[string]float64) {
	t.Helper()
	for _, d := range diffSamples(got, want) {
		t.Error(d)
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected %s = %v", k, v)
		}
	}
}

func TestAdmissionCollectorModesAndEngine(t *testing.T) {
	at := time.Unix(5000, 0)
	snap := func(up bool, waiting float64, age time.Duration) engine.Snapshot {
		s := engine.NewSnapshot()
		s.Kind, s.Up, s.At, s.Waiting, s.KVUsage = engine.KindVLLM, up, at.Add(-age), waiting, 0.2
		return s
	}
	tests := []struct {
		name       string
		mode       admission.Mode
		engine     admission.EngineSource
		failClosed bool
		wantMode   string
		wantState  string
	}{
		{"off: the mode only", admission.Off, nil, false, "off", ""},
		{"shadow, no engine data", admission.Shadow, nil, false, "shadow", "ok"},
		{"enforce, engine fine", admission.Enforce, engineStub{snap(true, 1, time.Second)}, false, "enforce", "ok"},
		{"enforce, engine queue past the threshold", admission.Enforce, engineStub{snap(true, 8, time.Second)}, false, "enforce", "saturated"},
		{"stale, policy open", admission.Enforce, engineStub{snap(true, 1, time.Minute)}, false, "enforce", "ok"},
		{"stale, policy closed", admission.Enforce, engineStub{snap(true, 1, time.Minute)}, true, "enforce", "engine-down"},
		{"down, policy closed", admission.Shadow, engineStub{snap(false, 0, 0)}, true, "shadow", "engine-down"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctrl := newController(t, tc.mode, clock.NewFake(at), admission.Options{
				Engine: tc.engine, Saturation: admission.Saturation{FailClosed: tc.failClosed},
			})
			_, reg := newMetrics(t, Options{Admission: ctrl})
			checkExactly(t, admissionGauges(t, reg), wantAdmission(tc.wantMode, tc.wantState, builtinTiers()))
		})
	}
}

func TestAdmissionCollectorTiers(t *testing.T) {
	clk := clock.NewFake(time.Unix(5000, 0))
	ctrl := newController(t, admission.Enforce, clk, admission.Options{})
	_, reg := newMetrics(t, Options{Admission: ctrl})

	// Three short requests and two batch requests of xlong (its cap) in flight; a third
	// batch request of xlong waits in its queue.
	short := []*admission.Ticket{
		admit(t, ctrl, shortPrompt, admission.Interactive), admit(t, ctrl, shortPrompt, admission.Interactive),
		admit(t, ctrl, shortPrompt, admission.Batch),
	}
	xlong := []*admission.Ticket{admit(t, ctrl, xlongPrompt, admission.Batch), admit(t, ctrl, xlongPrompt, admission.Batch)}
	queued := make(chan *admission.Ticket, 1)
	go func() {
		tk, err := ctrl.Admit(context.Background(), admission.Request{Model: "llama", Prompt: xlongPrompt, Class: admission.Batch})
		if err != nil {
			t.Errorf("the queued request was not admitted: %v", err)
		}
		queued <- tk
	}()
	waitFor(t, func() bool { return ctrl.Stats().Tiers[3].Queued[admission.Batch] == 1 })

	tiers := builtinTiers()
	tiers[0].inFlight, tiers[0].prefill = 3, 300 // no output yet: every prompt is in prefill
	tiers[3].inFlight, tiers[3].queued, tiers[3].prefill = 2, [3]float64{0, 1, 0}, 100000
	tiers[0].offered, tiers[3].offered = 3.0/60, 3.0/60 // three arrivals each in the last minute
	t.Run("busy", func(t *testing.T) {
		checkExactly(t, admissionGauges(t, reg), wantAdmission("enforce", "ok", tiers))
	})

	// The short requests end one second apart; the first xlong request's end lets the
	// queued one in, and then all end.
	start := clk.Now()
	for i, tk := range short {
		clk.SetTime(start.Add(time.Duration(i+1) * time.Second))
		tk.Done(okStream)
	}
	xlong[0].Done(measure.Result{Outcome: measure.OK, Status: 200})
	next := <-queued
	if next == nil {
		t.FailNow()
	}
	xlong[1].Done(measure.Result{Outcome: measure.OK, Status: 200})
	next.Done(measure.Result{Outcome: measure.OK, Status: 200})
	ctrl.Tick() // a feedback round: the short tier's p95s become known

	tiers = builtinTiers()
	// The service rate's formula is admission's; the collector must export it as is.
	if tiers[0].serviceRate = ctrl.Stats().Tiers[0].ServiceRate; tiers[0].serviceRate <= 0 {
		t.Fatalf("short's service rate is %v after three completions, want > 0", tiers[0].serviceRate)
	}
	tiers[0].p95TTFT, tiers[0].p95TPOT = 0.5, 0.02
	tiers[0].offered, tiers[3].offered = 3.0/60, 3.0/60
	t.Run("idle again", func(t *testing.T) {
		checkExactly(t, admissionGauges(t, reg), wantAdmission("enforce", "ok", tiers))
	})
}

// sustainableStub reports fixed sustainable rates.
type sustainableStub map[string]float64

func (s sustainableStub) Sustainable() map[string]float64 { return s }

// TestAdmissionCollectorDemand: the tiers with a calibrated λ* export it and their
// demand ratio, offered ÷ λ*, rejected arrivals included; the others neither, and an
// unusable λ* counts as none.
func TestAdmissionCollectorDemand(t *testing.T) {
	clk := clock.NewFake(time.Unix(5000, 0))
	ctrl := newController(t, admission.Enforce, clk, admission.Options{})
	_, reg := newMetrics(t, Options{Admission: ctrl, Sustainable: sustainableStub{
		"short": 0.5, "medium": math.Inf(1), "long": -1, "unknown": 3,
	}})
	// Twelve xlong requests at once: two run (its cap), four wait (its queue), six are
	// turned away; every one is demand.
	var held []*admission.Ticket
	for range 2 {
		held = append(held, admit(t, ctrl, xlongPrompt, admission.Batch))
	}
	queued := make(chan struct{}, 10)
	for range 10 {
		go func() {
			tk, err := ctrl.Admit(context.Background(), admission.Request{Model: "llama", Prompt: xlongPrompt, Class: admission.Batch})
			if err == nil {
				tk.Done(okStream)
			}
			queued <- struct{}{}
		}()
	}
	waitFor(t, func() bool { return len(queued) == 6 && ctrl.Stats().Tiers[3].Queued[admission.Batch] == 4 })
	for range 6 {
		admit(t, ctrl, shortPrompt, admission.Interactive).Done(okStream)
	}
	tiers := builtinTiers()
	tiers[0].offered, tiers[0].sustainable = 6.0/60, 0.5 // demand 0.2
	tiers[3].offered = 12.0 / 60                         // no λ*: no demand ratio
	tiers[3].inFlight, tiers[3].queued, tiers[3].prefill = 2, [3]float64{0, 4, 0}, 100000
	checkExactly(t, admissionGauges(t, reg), wantAdmission("enforce", "ok", tiers))
	for _, tk := range held {
		tk.Done(okStream)
	}
	for range 4 {
		<-queued
	}
}

// waitFor polls cond until it holds. It guards against a deadlock; it asserts no timing.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("the condition never held")
		}
		runtime.Gosched()
	}
}

func TestReloadCollector(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	ctrl := newController(t, admission.Enforce, clk, admission.Options{})
	dir := t.TempDir()
	reloads := admission.NewReloader(writeTiers(t, dir, validTiers), ctrl) // the initial load, at 1000
	_, reg := newMetrics(t, Options{Admission: ctrl, Reloads: reloads})

	const ok, ts = "slogate_admission_config_last_reload_successful", "slogate_admission_config_last_reload_success_timestamp_seconds"
	steps := []struct {
		name    string
		at      int64
		content string // "" to reload nothing, only scrape
		wantOK  float64
		wantTS  float64
	}{
		{"initial load", 1000, "", 1, 1000},
		{"valid reload", 1060, validTiers, 1, 1060},
		{"invalid reload keeps the last success", 1120, invalidTiers, 0, 1060},
		{"scraped again, still failed", 1180, "", 0, 1060},
		{"fixed", 1240, validTiers, 1, 1240},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			clk.SetTime(time.Unix(s.at, 0))
			if s.content != "" {
				writeTiers(t, dir, s.content)
				err := reloads.Reload()
				if (err == nil) != (s.wantOK == 1) {
					t.Fatalf("Reload() = %v, want success %v", err, s.wantOK == 1)
				}
			}
			want := map[string]float64{ok: s.wantOK, ts: s.wantTS}
			checkExactly(t, samples(t, reg, "slogate_admission_config_"), want)
		})
	}
	// The failed reload left the tiers of the valid file in force.
	if names := tierNames(ctrl.Stats()); names != "short,long" {
		t.Errorf("tiers after the reloads: %s, want short,long", names)
	}
}

func tierNames(st admission.Stats) string {
	var names []string
	for _, t := range st.Tiers {
		names = append(names, t.Name)
	}
	return strings.Join(names, ",")
}

// TestAdmissionTiersPrecreated checks which latency series exist before any request:
// those of the admission tiers when admission classifies requests, else tier "none".
func TestAdmissionTiersPrecreated(t *testing.T) {
	tests := []struct {
		name string
		mode admission.Mode
		src  bool
		want []string
	}{
		{"no admission", admission.Off, false, []string{"none"}},
		{"admission off", admission.Off, true, []string{"none"}},
		{"shadow", admission.Shadow, true, []string{"long", "medium", "short", "xlong"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := Options{ServedModels: served("llama")}
			if tc.src {
				opts.Admission = newController(t, tc.mode, clock.NewFake(time.Time{}), admission.Options{})
			}
			_, reg := newMetrics(t, opts)
			got := samples(t, reg, "slogate_time_to_first_token_seconds")
			if len(got) != 2*2*len(tc.want) { // {llama, other} x tiers x {count, sum}
				t.Errorf("%d TTFT samples, want %d: %v", len(got), 4*len(tc.want), got)
			}
			for _, model := range []string{"llama", "other"} {
				for _, tier := range tc.want {
					k := `slogate_time_to_first_token_seconds_count{model="` + model + `",tier="` + tier + `"}`
					if v, ok := got[k]; !ok || v != 0 {
						t.Errorf("%s = %v (present %v), want 0", k, v, ok)
					}
				}
			}
		})
	}
}
