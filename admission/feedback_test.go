package admission

import (
	"math"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/slogate/slogate/measure"
)

func TestP95NearestRank(t *testing.T) {
	seq := func(n int) []sample { // 1ms .. n ms, shuffled a little
		s := make([]sample, n)
		for i := range s {
			s[(i*7)%n] = sample{v: time.Duration(i+1) * time.Millisecond}
		}
		return s
	}
	tests := []struct {
		name string
		s    []sample
		min  int
		want time.Duration
	}{
		{name: "none", s: nil, want: 0},
		{name: "fewer than min", s: seq(19), min: 20, want: 0},
		{name: "one", s: seq(1), want: time.Millisecond},
		{name: "20: the 19th", s: seq(20), min: 20, want: 19 * time.Millisecond},
		{name: "21: ceil(19.95) = 20th", s: seq(21), want: 20 * time.Millisecond},
		{name: "100: the 95th", s: seq(100), want: 95 * time.Millisecond},
		{name: "101: ceil(95.95) = 96th", s: seq(101), want: 96 * time.Millisecond},
		{name: "2: the 2nd", s: seq(2), want: 2 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := p95(tt.s, time.Time{}, tt.min); got != tt.want {
				t.Fatalf("p95 = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestAdjust runs one round of the AIMD controller on a tier in a known state.
func TestAdjust(t *testing.T) {
	const sloTTFT, sloTPOT = time.Second, 100 * time.Millisecond
	fb := Feedback{Interval: measure.Duration(2 * time.Second), Window: measure.Duration(30 * time.Second), MinSamples: 20, Backoff: 0.5, Increase: 1, Target: 1}
	many := func(n int, v time.Duration) []time.Duration {
		s := make([]time.Duration, n)
		for i := range s {
			s[i] = v
		}
		return s
	}
	tests := []struct {
		name       string
		limit      float64
		min, max   int
		queued     int
		capHits    int           // arrivals turned away for the cap since the last round
		changedAgo time.Duration // since the cap last changed; 0: never
		grownAgo   time.Duration // since it last grew unjudged; 0: never
		ttft, tpot []time.Duration
		age        time.Duration // of every observation
		sinceLast  time.Duration // since the previous round; 0: never ran
		noSLO      bool          // else sloTTFT, sloTPOT
		want       float64
	}{
		{name: "TTFT missed: multiplied by backoff", limit: 10, min: 1, max: 10, ttft: many(20, 2*sloTTFT), want: 5},
		{name: "TPOT missed: multiplied by backoff", limit: 10, min: 1, max: 10, tpot: many(20, 2*sloTPOT), want: 5},
		{name: "missed while requests wait: still backs off", limit: 10, min: 1, max: 10, queued: 3, ttft: many(20, 2*sloTTFT), want: 5},
		{name: "backoff stops at min", limit: 3, min: 2, max: 10, ttft: many(20, 2*sloTTFT), want: 2},
		{name: "backoff at min stays", limit: 2, min: 2, max: 10, ttft: many(20, 2*sloTTFT), want: 2},
		{name: "met and waiting: additive increase", limit: 5, min: 1, max: 10, queued: 1, ttft: many(20, sloTTFT/2), tpot: many(20, sloTPOT/2), want: 6},
		{name: "increase stops at max", limit: 9.5, min: 1, max: 10, queued: 1, ttft: many(20, sloTTFT/2), want: 10},
		{name: "exactly on the SLO is met", limit: 5, min: 1, max: 10, queued: 1, ttft: many(20, sloTTFT), tpot: many(20, sloTPOT), want: 6},
		{name: "met, nobody waiting: unchanged", limit: 5, min: 1, max: 10, ttft: many(20, sloTTFT/2), want: 5},
		{name: "fewer than min_samples: unchanged", limit: 10, min: 1, max: 10, queued: 1, ttft: many(19, 2*sloTTFT), want: 10},
		{name: "only old observations: unchanged", limit: 10, min: 1, max: 10, ttft: many(40, 2*sloTTFT), age: 31 * time.Second, want: 10},
		{name: "observations at the window's edge count", limit: 10, min: 1, max: 10, ttft: many(20, 2*sloTTFT), age: 30 * time.Second, want: 5},
		{name: "before the interval: unchanged", limit: 10, min: 1, max: 10, ttft: many(20, 2*sloTTFT), sinceLast: 2*time.Second - 1, want: 10},
		{name: "at the interval: runs", limit: 10, min: 1, max: 10, ttft: many(20, 2*sloTTFT), sinceLast: 2 * time.Second, want: 5},
		{name: "one slow in 20 is under p95", limit: 5, min: 1, max: 10, queued: 1, ttft: append(many(19, sloTTFT/2), 10*sloTTFT), want: 6},
		{name: "two slow in 20 reach p95", limit: 10, min: 1, max: 10, ttft: append(many(18, sloTTFT/2), 10*sloTTFT, 10*sloTTFT), want: 5},
		{name: "no SLO set: never missed", limit: 5, min: 1, max: 10, queued: 1, ttft: many(20, time.Hour), noSLO: true, want: 6},
		{name: "met, turned away for the cap: additive increase", limit: 5, min: 1, max: 10, capHits: 2, ttft: many(20, sloTTFT/2), want: 6},
		{name: "missed, turned away for the cap: still backs off", limit: 10, min: 1, max: 10, capHits: 2, ttft: many(20, 2*sloTTFT), want: 5},
		{name: "too few to judge, turned away for the cap: grows", limit: 3, min: 1, max: 10, capHits: 1, ttft: many(19, 2*sloTTFT), want: 4},
		{name: "too few to judge a window after the change: grows", limit: 3, min: 1, max: 10, capHits: 1, changedAgo: 30 * time.Second, want: 4},
		{name: "too few to judge within a window of the change: unchanged", limit: 3, min: 1, max: 10, capHits: 1, changedAgo: 29 * time.Second, want: 3},
		{name: "too few to judge within a window of the last growth: unchanged", limit: 3, min: 1, max: 10, capHits: 1, changedAgo: time.Hour, grownAgo: 29 * time.Second, want: 3},
		{name: "too few to judge, nobody turned away: unchanged", limit: 3, min: 1, max: 10, queued: 1, ttft: many(19, 2*sloTTFT), want: 3},
		{name: "too few to judge: grows no higher than max", limit: 10, min: 1, max: 10, capHits: 1, want: 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			slo := measure.NewSLO(sloTTFT, sloTPOT)
			if tt.noSLO {
				slo = measure.SLO{}
			}
			now := epoch
			ts := newTierState(TierConfig{Name: "t", MinInFlight: tt.min, MaxInFlight: tt.max, SLO: slo}, now)
			ts.limit, ts.queued, ts.capHits = tt.limit, tt.queued, tt.capHits
			if tt.changedAgo > 0 {
				ts.changed = now.Add(-tt.changedAgo)
			}
			if tt.grownAgo > 0 {
				ts.grown = now.Add(-tt.grownAgo)
			}
			if tt.sinceLast > 0 {
				ts.adjusted = now.Add(-tt.sinceLast)
			}
			for _, v := range tt.ttft {
				ts.slo.observe(now.Add(-tt.age), now.Add(-tt.age), v, 0)
			}
			for _, v := range tt.tpot {
				ts.slo.observe(now.Add(-tt.age), now.Add(-tt.age), 0, v)
			}
			changed := ts.adjust(now, fb)
			if ts.limit != tt.want || changed != (tt.want != tt.limit) {
				t.Fatalf("limit %v (changed %v), want %v", ts.limit, changed, tt.want)
			}
			// A change by a verdict starts a new count of the requests that judge the cap;
			// one without (too few samples) keeps counting those since the last verdict.
			judged := ts.slo.p95TTFT != 0 || ts.slo.p95TPOT != 0
			if tt.want != tt.limit && judged != ts.changed.Equal(now) {
				t.Fatalf("the cap changed (judged %v); the change recorded at %v", judged, ts.changed)
			}
			if ts.capHits != 0 {
				t.Fatalf("%d hits left after the round", ts.capHits)
			}
		})
	}
}

// TestAdjustJudgesOnlyTheNewCap: after the cap changes, requests dispatched under the
// old cap no longer count, however recently they ended; and the p95s aim at Target of
// the SLO.
func TestAdjustJudgesOnlyTheNewCap(t *testing.T) {
	fb := Feedback{Interval: measure.Duration(time.Second), Window: measure.Duration(time.Minute), MinSamples: 3, Backoff: 0.5, Increase: 1, Target: 0.9}
	now := epoch
	ts := newTierState(TierConfig{Name: "t", MinInFlight: 1, MaxInFlight: 16, SLO: measure.SLO{TPOT: measure.Duration(100 * time.Millisecond)}}, now)
	ts.queued = 1
	observe := func(sent time.Time, tpot time.Duration, n int) {
		for range n {
			ts.slo.observe(now, sent, 0, tpot)
		}
	}
	// 95 ms is within the SLO but over 90% of it: a miss, and the cap halves.
	observe(now.Add(-10*time.Second), 95*time.Millisecond, 3)
	if !ts.adjust(now, fb) || ts.limit != 8 {
		t.Fatalf("p95 at 95%% of the SLO: limit %v, want 8", ts.limit)
	}
	// Later, more slow requests end, but all were dispatched before the change: the
	// controller waits for evidence about the new cap instead of halving again.
	now = now.Add(2 * time.Second)
	observe(now.Add(-5*time.Second), 200*time.Millisecond, 10)
	if ts.adjust(now, fb) || ts.limit != 8 {
		t.Fatalf("judged the new cap by old requests: limit %v, want 8", ts.limit)
	}
	// Requests dispatched under the new cap meet the aim: it grows again.
	now = now.Add(2 * time.Second)
	observe(now.Add(-time.Second), 50*time.Millisecond, 3)
	if !ts.adjust(now, fb) || ts.limit != 9 {
		t.Fatalf("met under the new cap: limit %v, want 9", ts.limit)
	}
}

// feedbackConfig is a tier with cap 4 that may fall to 1, adjusted every 2s after 5
// observations; requests wait up to a minute.
func feedbackConfig() Config {
	cfg := tierConfig(func(tc *TierConfig) {
		tc.MaxInFlight, tc.MaxQueue, tc.MaxQueueWait = 4, 8, measure.Duration(time.Minute)
	})
	cfg.Feedback = Feedback{Interval: measure.Duration(2 * time.Second), MinSamples: 5, Backoff: 0.5}
	return cfg
}

func (h *harness) finishWith(n int, res measure.Result) {
	h.t.Helper()
	for range n {
		h.admitNow(req(1)).Done(res)
	}
}

// Through the Controller: results fed by Done, the controller run by Tick.
func TestFeedbackLoop(t *testing.T) {
	h := newHarness(t, Enforce, feedbackConfig())
	slow := measure.Result{Stream: true, Outcome: measure.OK, OutputChunks: 10, TTFT: 3 * time.Second, TPOT: 10 * time.Millisecond}
	fast := measure.Result{Stream: true, Outcome: measure.OK, OutputChunks: 10, TTFT: 100 * time.Millisecond, TPOT: 10 * time.Millisecond}

	h.finishWith(5, slow)
	h.c.Tick()
	if st := h.only(); st.Limit != 2 || st.P95TTFT != 3*time.Second || st.P95TPOT != 10*time.Millisecond {
		t.Fatalf("after misses: limit %v p95 %v/%v, want 2, 3s/10ms", st.Limit, st.P95TTFT, st.P95TPOT)
	}
	h.finishWith(5, slow)
	h.clock.Step(time.Second)
	h.c.Tick() // within the interval
	if st := h.only(); st.Limit != 2 {
		t.Fatalf("limit %v changed before the interval", st.Limit)
	}
	h.clock.Step(time.Second)
	h.c.Tick()
	if st := h.only(); st.Limit != 1 {
		t.Fatalf("limit %v, want 1 (the floor)", st.Limit)
	}

	// SLOs met but nobody waiting: the cap stays.
	h.finishWith(5, fast)
	h.clock.Step(2 * time.Second)
	h.c.Tick()
	if st := h.only(); st.Limit != 1 {
		t.Fatalf("limit %v grew with nobody waiting", st.Limit)
	}

	// Met and a request waits: the cap grows, and the waiter goes at once.
	a := h.admitNow(req(1))
	p := h.admitAsync(req(1), 1)
	h.clock.Step(2 * time.Second)
	h.c.Tick()
	b := h.granted(p)
	if st := h.only(); st.Limit != 2 || st.InFlight != 2 {
		t.Fatalf("limit %v in flight %d, want 2 and 2", st.Limit, st.InFlight)
	}
	a.Done(fast)
	b.Done(fast)
}

func TestFeedbackOnlyOKStreams(t *testing.T) {
	tests := []struct {
		name string
		res  measure.Result
		fed  bool
	}{
		{name: "ok stream", res: measure.Result{Stream: true, Outcome: measure.OK, OutputChunks: 10, TTFT: time.Minute, TPOT: time.Second}, fed: true},
		{name: "ok stream without output", res: measure.Result{Stream: true, Outcome: measure.OK, TTFT: time.Minute, TPOT: time.Second}},
		{name: "ok, not streamed", res: measure.Result{Outcome: measure.OK, OutputChunks: 10, TTFT: time.Minute, TPOT: time.Second}},
		{name: "stream broke off", res: measure.Result{Stream: true, Outcome: measure.AbortedMidstream, OutputChunks: 10, TTFT: time.Minute, TPOT: time.Second}},
		{name: "client cancelled", res: measure.Result{Stream: true, Outcome: measure.ClientCancelled, OutputChunks: 10, TTFT: time.Minute}},
		{name: "upstream error", res: measure.Result{Stream: true, Outcome: measure.UpstreamError, OutputChunks: 10, TTFT: time.Minute}},
		{name: "upstream timeout", res: measure.Result{Stream: true, Outcome: measure.UpstreamTimeout, OutputChunks: 10, TTFT: time.Minute}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Enforce, feedbackConfig())
			h.finishWith(5, tt.res)
			h.c.Tick()
			st := h.only()
			if fed := st.P95TTFT != 0; fed != tt.fed || (st.Limit < 4) != tt.fed {
				t.Fatalf("p95 TTFT %v, limit %v: fed = %v, want %v", st.P95TTFT, st.Limit, fed, tt.fed)
			}
		})
	}
}

// In shadow mode a request held in the virtual queue is demand the cap may grow for.
func TestFeedbackShadowDemand(t *testing.T) {
	h := newHarness(t, Shadow, feedbackConfig())
	fast := measure.Result{Stream: true, Outcome: measure.OK, OutputChunks: 10, TTFT: 100 * time.Millisecond, TPOT: 10 * time.Millisecond}
	h.c.mu.Lock()
	h.c.tiers[0].limit = 1
	h.c.mu.Unlock()
	h.finishWith(5, fast)
	a, b := h.admitNow(req(1)), h.admitNow(req(1))
	wantDecision(t, h.rec.last(t), Decision{Verdict: Queued, Reason: InFlightCap, Shadow: true})
	h.c.Tick()
	if st := h.only(); st.Limit != 2 || st.queuedTotal() != 0 || st.InFlight != 2 {
		t.Fatalf("stats %+v, want limit 2 and b (virtually) dispatched", st)
	}
	a.Done(fast)
	b.Done(fast)
	if st := h.only(); st.InFlight != 0 {
		t.Fatalf("in flight %d", st.InFlight)
	}
}

// TestAdjustCutsWithTheOvershoot: a p95 a little over the aim costs Backoff of the cap,
// one far over it costs aim/p95, and never more than half.
func TestAdjustCutsWithTheOvershoot(t *testing.T) {
	fb := Feedback{Interval: measure.Duration(time.Second), Window: measure.Duration(time.Minute), MinSamples: 1, Backoff: 0.9, Increase: 1, Target: 1}
	for _, tc := range []struct {
		tpot time.Duration
		want float64
	}{
		{105 * time.Millisecond, 90}, // 100/105 = 0.95: the Backoff of 0.9 applies
		{125 * time.Millisecond, 80}, // 100/125 = 0.8
		{400 * time.Millisecond, 50}, // 100/400 = 0.25, held at 0.5
	} {
		ts := newTierState(TierConfig{Name: "t", MinInFlight: 1, MaxInFlight: 100, SLO: measure.SLO{TPOT: measure.Duration(100 * time.Millisecond)}}, epoch)
		ts.slo.observe(epoch, epoch, 0, tc.tpot)
		ts.adjust(epoch, fb)
		if ts.limit != tc.want {
			t.Errorf("p95 TPOT %v: cap 100 became %v, want %v", tc.tpot, ts.limit, tc.want)
		}
	}
}

// TestAdjustRate runs one round of the rate's feedback on a tier with a max_rate.
func TestAdjustRate(t *testing.T) {
	const sloTTFT = time.Second
	fb := Feedback{Interval: measure.Duration(time.Second), Window: measure.Duration(time.Minute), MinSamples: 5, Backoff: 0.5, Increase: 1, Target: 1}
	tests := []struct {
		name          string
		rate, maxRate float64
		working       float64
		hits          int
		ttft          time.Duration
		want          float64
	}{
		{name: "met and turned away for rate: up 5%", rate: 1, maxRate: 2, working: 1, hits: 3, ttft: sloTTFT / 2, want: 1.05},
		{name: "up stops at max_rate", rate: 1, maxRate: 2, working: 1.99, hits: 1, ttft: sloTTFT / 2, want: 2},
		{name: "met, nobody turned away: unchanged", rate: 1, maxRate: 2, working: 1.5, ttft: sloTTFT / 2, want: 1.5},
		{name: "missed: cut like the cap", rate: 1, maxRate: 2, working: 1.6, hits: 3, ttft: 2 * sloTTFT, want: 1},
		{name: "cut stops at rate", rate: 1, maxRate: 2, working: 1.2, ttft: 2 * sloTTFT, want: 1},
		{name: "no max_rate: the rate stays", rate: 1, working: 1, hits: 3, ttft: sloTTFT / 2, want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := epoch
			cfg := TierConfig{Name: "t", Rate: tt.rate, Burst: 1, MaxRate: tt.maxRate, MinInFlight: 1, MaxInFlight: 10, SLO: measure.SLO{TTFT: measure.Duration(sloTTFT)}}
			if err := (Config{Tiers: []TierConfig{cfg}}).Validate(); err != nil {
				t.Fatal(err)
			}
			ts := newTierState(cfg, now)
			ts.rate, ts.rateHits = tt.working, tt.hits
			ts.limiter.SetLimitAt(now, rate.Limit(tt.working))
			for range 5 {
				ts.slo.observe(now, now, tt.ttft, 0)
			}
			ts.adjust(now, fb)
			if math.Abs(ts.rate-tt.want) > 1e-9 || math.Abs(float64(ts.limiter.Limit())-tt.want) > 1e-9 || ts.rateHits != 0 {
				t.Fatalf("rate %v (bucket %v, hits left %d), want %v", ts.rate, ts.limiter.Limit(), ts.rateHits, tt.want)
			}
		})
	}
}

// A reload that changes a tier's rate starts its feedback over; one that keeps it keeps
// the working rate.
func TestConfigureKeepsWorkingRate(t *testing.T) {
	cfg := TierConfig{Name: "t", Rate: 1, Burst: 1, MaxRate: 2, MaxInFlight: 4}
	ts := newTierState(cfg, epoch)
	ts.rate = 1.5
	ts.configure(cfg, epoch)
	if ts.rate != 1.5 {
		t.Errorf("same rate reloaded: working rate %v, want 1.5 kept", ts.rate)
	}
	cfg.Rate, cfg.MaxRate = 0.8, 1.2
	ts.configure(cfg, epoch)
	if ts.rate != 0.8 || float64(ts.limiter.Limit()) != 0.8 {
		t.Errorf("new rate: working rate %v (bucket %v), want 0.8", ts.rate, ts.limiter.Limit())
	}
}

// An arrival the in-flight cap holds back and that is then turned away (here by a tier
// without a queue) is demand above the cap: with too few requests to judge the cap, the
// next round grows it by Increase; without such an arrival it stays.
func TestCapGrowsWithDemandUnjudged(t *testing.T) {
	for _, tc := range []struct {
		name     string
		arrivals int
		want     float64
	}{
		{"one in flight, none turned away", 1, 1},
		{"one turned away for the cap", 2, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tierConfig(func(tc *TierConfig) { tc.MaxInFlight, tc.MaxQueue = 4, 0 })
			cfg.Feedback = Feedback{Interval: measure.Duration(time.Second), MinSamples: 10}
			h := newHarness(t, Enforce, cfg)
			h.c.mu.Lock()
			h.c.tiers[0].limit = 1
			h.c.mu.Unlock()
			first := h.admitNow(req(10))
			for range tc.arrivals - 1 {
				h.rejectNow(req(10), QueueFull)
			}
			h.clock.Step(time.Second)
			h.c.Tick()
			if got := h.only().Limit; got != tc.want {
				t.Errorf("cap %v, want %v", got, tc.want)
			}
			first.Done(ok)
		})
	}
}
