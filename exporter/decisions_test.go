package exporter

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/clock"
)

func TestObserveDecision(t *testing.T) {
	const name = "slogate_admission_decisions_total"
	key := func(tier, class, decision, reason string) string {
		return name + `{class="` + class + `",decision="` + decision + `",reason="` + reason + `",tier="` + tier + `"}`
	}
	tests := []struct {
		name      string
		decisions []admission.Decision
		want      map[string]float64
	}{{
		name: "each label set counted apart",
		decisions: []admission.Decision{
			{Tier: "short", Class: admission.Interactive, Verdict: admission.Admitted},
			{Tier: "short", Class: admission.Interactive, Verdict: admission.Admitted},
			{Tier: "short", Class: admission.Batch, Verdict: admission.Queued, Reason: admission.InFlightCap, Wait: time.Second},
			{Tier: "long", Class: admission.Interactive, Verdict: admission.Rejected, Reason: admission.QueueFull},
			{Tier: "long", Class: admission.Probe, Verdict: admission.Rejected, Reason: admission.Shed},
		},
		want: map[string]float64{
			key("short", "interactive", "admitted", "none"):      2,
			key("short", "batch", "queued", "in-flight-cap"):     1,
			key("long", "interactive", "rejected", "queue-full"): 1,
			key("long", "probe", "rejected", "shed"):             1,
		},
	}, {
		name: "shadow decisions count the same",
		decisions: []admission.Decision{
			{Tier: "short", Verdict: admission.Rejected, Reason: admission.TierRate, Shadow: true},
			{Tier: "short", Verdict: admission.Rejected, Reason: admission.TierRate},
		},
		want: map[string]float64{key("short", "interactive", "rejected", "tier-rate"): 2},
	}, {
		name: "out-of-range enums share the unknown label",
		decisions: []admission.Decision{
			{Tier: "short", Class: 200, Verdict: 201, Reason: 202},
			{Tier: "short", Class: 100, Verdict: 101, Reason: 102},
		},
		want: map[string]float64{key("short", "unknown", "unknown", "unknown"): 2},
	}, {
		name:      "no tier is none",
		decisions: []admission.Decision{{Verdict: admission.Rejected, Reason: admission.EngineDown}},
		want:      map[string]float64{key("none", "interactive", "rejected", "engine-down"): 1},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, reg := newMetrics(t, Options{})
			for _, d := range tc.decisions {
				m.ObserveDecision(d)
			}
			checkExactly(t, samples(t, reg, name), tc.want)
		})
	}
}

// TestDecisionsFromController counts the decisions a real controller reports: one tier
// of one slot and no queue, so a second request is turned away until the first ends.
func TestDecisionsFromController(t *testing.T) {
	const name = "slogate_admission_decisions_total"
	cfg := admission.Config{Tiers: []admission.TierConfig{{Name: "only", MaxInFlight: 1}}}
	for _, mode := range []admission.Mode{admission.Enforce, admission.Shadow} {
		t.Run(mode.String(), func(t *testing.T) {
			var relay decisionRelay
			ctrl, err := admission.New(cfg, admission.Options{Mode: mode, Clock: clock.NewFake(time.Unix(1, 0)),
				Observers: []admission.DecisionObserver{&relay}})
			if err != nil {
				t.Fatal(err)
			}
			m, reg := newMetrics(t, Options{Admission: ctrl})
			relay.m = m
			req := admission.Request{Model: "llama", Prompt: shortPrompt}
			first := admit(t, ctrl, shortPrompt, admission.Interactive)
			second, err := ctrl.Admit(context.Background(), req)
			var rej *admission.Rejection
			if mode == admission.Enforce && !errors.As(err, &rej) {
				t.Fatalf("the second request: %v, want a rejection", err)
			}
			if mode == admission.Shadow {
				second.Done(okStream) // shadow admits it anyway
			}
			first.Done(okStream)
			admit(t, ctrl, shortPrompt, admission.Batch).Done(okStream)
			checkExactly(t, samples(t, reg, name), map[string]float64{
				name + `{class="interactive",decision="admitted",reason="none",tier="only"}`:       1,
				name + `{class="interactive",decision="rejected",reason="queue-full",tier="only"}`: 1,
				name + `{class="batch",decision="admitted",reason="none",tier="only"}`:             1,
			})
		})
	}
}

func TestObserveDecisionAllocs(t *testing.T) {
	m, _ := newMetrics(t, Options{})
	ds := []admission.Decision{
		{Tier: "short", Class: admission.Interactive, Verdict: admission.Admitted},
		{Tier: "long", Class: admission.Batch, Verdict: admission.Rejected, Reason: admission.QueueFull, Shadow: true},
		{Tier: "", Class: admission.Probe, Verdict: admission.Queued, Reason: admission.Saturated, Wait: time.Second},
	}
	for _, d := range ds {
		m.ObserveDecision(d) // creates the series
	}
	allocs := testing.AllocsPerRun(1000, func() {
		for _, d := range ds {
			m.ObserveDecision(d)
		}
	})
	if allocs != 0 {
		t.Errorf("ObserveDecision allocates %v times per decision, want 0", allocs/float64(len(ds)))
	}
}

func BenchmarkObserveDecision(b *testing.B) {
	m, _ := newMetrics(b, Options{})
	d := admission.Decision{Tier: "short", Class: admission.Interactive, Verdict: admission.Admitted}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.ObserveDecision(d)
		}
	})
}
