package admission

import (
	"testing"
	"time"

	"github.com/slogate/slogate/engine"
	"github.com/slogate/slogate/measure"
)

func TestStats(t *testing.T) {
	cfg := Config{Tiers: []TierConfig{
		{Name: "a", MaxInputTokens: 100, Rate: 50, Burst: 20, MaxInFlight: 5, MinInFlight: 2, MaxQueue: 6,
			MaxQueueWait: measure.Duration(3 * time.Second), SLO: measure.SLO{TTFT: measure.Duration(500 * time.Millisecond)}},
		{Name: "b", MaxInFlight: 1},
	}, Feedback: Feedback{MinSamples: 3}}
	h := newHarness(t, Enforce, cfg)

	st := h.c.Stats()
	if st.Mode != Enforce || st.Engine != NoReason || len(st.Tiers) != 2 {
		t.Fatalf("stats %+v", st)
	}
	want := TierStats{Name: "a", MaxInputTokens: 100, Limit: 5, MinInFlight: 2, MaxInFlight: 5, MaxQueue: 6,
		MaxQueueWait: 3 * time.Second, Rate: 50, Burst: 20,
		SLO: measure.NewSLO(500*time.Millisecond, 100*time.Millisecond)}
	if st.Tiers[0] != want {
		t.Fatalf("tier a\n got %+v\nwant %+v", st.Tiers[0], want)
	}
	if b := st.Tiers[1]; b.Name != "b" || b.MaxInputTokens != 0 || b.MinInFlight != 1 || b.Rate != 0 || b.SLO.TTFT != measure.Duration(time.Second) {
		t.Fatalf("tier b %+v", b)
	}

	// Completions one second apart, with TTFTs 100..300ms and TPOTs 10..30ms.
	for i := 1; i <= 3; i++ {
		h.clock.Step(time.Second)
		h.admitNow(req(1)).Done(measure.Result{Stream: true, Outcome: measure.OK, OutputChunks: 10,
			TTFT: time.Duration(i) * 100 * time.Millisecond, TPOT: time.Duration(i) * 10 * time.Millisecond})
	}
	h.c.Tick()
	var tks []*Ticket
	for _, c := range []Class{Batch, Batch, Batch, Interactive} {
		tks = append(tks, h.admitNow(classReq(c)))
	}
	pb := h.admitAsync(classReq(Batch), 1)
	pp := h.admitAsync(classReq(Probe), 1)
	tks = append(tks, h.admitNow(classReq(Interactive)))
	pi := h.admitAsync(classReq(Interactive), 1)

	a := h.tierStats("a")
	if a.InFlight != 5 || a.Queued != [numClasses]int{1, 1, 1} {
		t.Fatalf("in flight %d, queued %v; want 5 and one of each class", a.InFlight, a.Queued)
	}
	if a.P95TTFT != 300*time.Millisecond || a.P95TPOT != 30*time.Millisecond {
		t.Fatalf("p95s %v/%v", a.P95TTFT, a.P95TPOT)
	}
	if a.ServiceRate != 1 {
		t.Fatalf("service rate %v, want 1/s", a.ServiceRate)
	}
	h.clock.Step(serviceWindow)
	if r := h.tierStats("a").ServiceRate; r != 0 {
		t.Fatalf("service rate %v with nothing done in the last %s, want 0", r, serviceWindow)
	}

	h.eng.Set(snap(h.clock.Now(), func(s *engine.Snapshot) { s.Waiting = 100 }))
	if got := h.c.Stats().Engine; got != Saturated {
		t.Fatalf("engine %s, want saturated", got)
	}
	h.eng.Set(snap(h.clock.Now()))
	for _, p := range []*pending{pb, pp, pi} {
		p.cancel()
		p.result()
	}
	for _, tk := range tks {
		tk.Done(ok)
	}
	if a := h.tierStats("a"); a.InFlight != 0 || a.queuedTotal() != 0 {
		t.Fatalf("stats %+v", a)
	}
}

func TestStatsShadowCountsEverythingInFlight(t *testing.T) {
	h := newHarness(t, Shadow, tierConfig(func(tc *TierConfig) { tc.MaxQueue = 0 }))
	a, b := h.admitNow(req(1)), h.admitNow(req(1))
	if st := h.c.Stats(); st.Mode != Shadow || st.Tiers[0].InFlight != 2 {
		t.Fatalf("stats %+v", st)
	}
	a.Done(ok)
	b.Done(ok)
	if st := h.only(); st.InFlight != 0 {
		t.Fatalf("in flight %d", st.InFlight)
	}
}
