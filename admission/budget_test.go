package admission

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slogate/slogate/engine"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/wire"
)

// budgeted is a configuration of tenant a with budget b, and b, a tenant without one;
// the tier has cap 8 and a queue of 8.
func budgeted(b Budget) Config {
	return withCap(tenantsConfig([]TenantConfig{{Name: "a", Budget: b}, {Name: "b"}}), 8)
}

// withCap returns cfg with its first tier's in-flight cap of n.
func withCap(cfg Config, n int) Config {
	cfg.Tiers[0].MaxInFlight = n
	return cfg
}

// bounded is a request of tenant of n input tokens and at most out output tokens.
func bounded(tenant string, n, out int) Request { r := treq(tenant, n); r.Output = out; return r }

// answered is the result of a request that streamed out output tokens.
func answered(out int) measure.Result {
	return measure.Result{Stream: true, Outcome: measure.OK, OutputTokens: out}
}

// Each budget turns a request away with its reason, a Retry-After of when the request
// would fit, and the tenant's quota on the rejection; admitted tickets carry what is
// left after their reservation.
func TestBudgetRejections(t *testing.T) {
	tests := []struct {
		name   string
		budget Budget
		fill   []Request     // admitted (and ended) first
		over   Request       // then turned away
		reason Reason        // for this reason
		retry  time.Duration // with this Retry-After, after which it fits
		quota  func(Quota) Allowance
		left   []float64 // what the fill's tickets had left
		want   Allowance // the allowance on the rejection
	}{
		{
			name: "requests", budget: Budget{RequestsPerMinute: 2},
			fill: []Request{treq("a", 10), treq("a", 10)}, over: treq("a", 10),
			reason: TenantRequests, retry: 30 * time.Second, // one request refills in 60s/2
			quota: func(q Quota) Allowance { return q.Requests },
			left:  []float64{1, 0}, want: Allowance{Limit: 2, Remaining: 0, Reset: time.Minute},
		},
		{
			name: "input tokens", budget: Budget{InputTokensPerMinute: 1000},
			fill: []Request{treq("a", 600)}, over: treq("a", 600),
			reason: TenantInputTokens, retry: 12 * time.Second, // 200 tokens at 1000/min
			quota: func(q Quota) Allowance { return q.InputTokens },
			left:  []float64{400}, want: Allowance{Limit: 1000, Remaining: 400, Reset: 36 * time.Second},
		},
		{
			name: "input tokens, more than a minute's worth", budget: Budget{InputTokensPerMinute: 1000},
			over: treq("a", 1001), reason: TenantInputTokens, retry: time.Minute,
			quota: func(q Quota) Allowance { return q.InputTokens },
			want:  Allowance{Limit: 1000, Remaining: 1000},
		},
		{
			name: "output tokens of max_tokens", budget: Budget{OutputTokensPerMinute: 1000},
			fill: []Request{bounded("a", 10, 600)}, over: bounded("a", 10, 600),
			reason: TenantOutputTokens, retry: 12 * time.Second,
			quota: func(q Quota) Allowance { return q.OutputTokens },
			left:  []float64{400}, want: Allowance{Limit: 1000, Remaining: 400, Reset: 36 * time.Second},
		},
		{
			name: "output tokens of the mean", budget: Budget{OutputTokensPerMinute: 1000},
			fill: []Request{treq("a", 10), treq("a", 10), treq("a", 10)}, over: treq("a", 10), // 256 each
			reason: TenantOutputTokens, retry: 1440 * time.Millisecond, // 24 of 256 at 1000/min
			quota: func(q Quota) Allowance { return q.OutputTokens },
			left:  []float64{744, 488, 232}, want: Allowance{Limit: 1000, Remaining: 232, Reset: 46080 * time.Millisecond},
		},
		{
			// Two budgets spent: the reason and Retry-After are of the one that binds
			// longest (requests fit again in 30s, input tokens in 60s).
			name: "requests and input tokens", budget: Budget{RequestsPerMinute: 2, InputTokensPerMinute: 1000},
			fill: []Request{treq("a", 500), treq("a", 500)}, over: treq("a", 1000),
			reason: TenantInputTokens, retry: time.Minute,
			quota: func(q Quota) Allowance { return q.InputTokens },
			left:  []float64{500, 0}, want: Allowance{Limit: 1000, Remaining: 0, Reset: time.Minute},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Enforce, budgeted(tt.budget))
			var tks []*Ticket
			for i, r := range tt.fill {
				tk := h.admitNow(r)
				tks = append(tks, tk)
				if got := tt.quota(tk.Quota()).Remaining; got != tt.left[i] {
					t.Fatalf("ticket %d: %v left, want %v", i, got, tt.left[i])
				}
				if tk.Tenant() != "a" {
					t.Fatalf("ticket of tenant %q", tk.Tenant())
				}
			}
			defer func() { // still in flight: holding what they reserved
				for _, tk := range tks {
					tk.Done(answered(tk.output))
				}
			}()
			rej := h.rejectNow(tt.over, tt.reason)
			if rej.RetryAfter != tt.retry || rej.Tenant != "a" || rej.Status() != http.StatusTooManyRequests || !strings.Contains(rej.Message, "tenant a") {
				t.Fatalf("rejection %+v (status %d); want Retry-After %v", rej, rej.Status(), tt.retry)
			}
			if got := tt.quota(rej.Quota); got != tt.want {
				t.Fatalf("quota on the rejection %+v, want %+v", got, tt.want)
			}
			wantTenantDecision(t, h.rec.last(t), Decision{Tenant: "a", Verdict: Rejected, Reason: tt.reason})
			defer h.admitNow(treq("b", 10)).Done(ok) // the other tenant is not held back
			if tt.retry == time.Minute && len(tt.fill) == 0 {
				return // it never fits
			}
			h.clock.Step(tt.retry - time.Millisecond)
			h.rejectNow(tt.over, tt.reason)
			h.clock.Step(time.Millisecond)
			h.admitNow(tt.over).Done(ok)
		})
	}
}

func TestTenantConcurrency(t *testing.T) {
	h := newHarness(t, Enforce, withCap(budgeted(Budget{MaxConcurrent: 2}), 1))
	running := h.admitNow(treq("a", 10))
	waiting := h.enqueue(treq("a", 10)) // waiting counts as open
	if st := h.tenantStats("a"); st.Open != 2 || st.Queued != 1 {
		t.Fatalf("a: %d open, %d queued; want 2 and 1", st.Open, st.Queued)
	}
	rej := h.rejectNow(treq("a", 10), TenantConcurrency)
	if rej.RetryAfter != time.Second || rej.Quota.Set() || rej.Tenant != "a" {
		t.Fatalf("rejection %+v", rej)
	}
	running.Done(ok)
	next := h.granted(waiting)
	p := h.enqueue(treq("a", 10)) // one open again: a second fits
	h.rejectNow(treq("a", 10), TenantConcurrency)
	next.Done(ok)
	h.granted(p).Done(ok)
	if st := h.tenantStats("a"); st.Open != 0 {
		t.Fatalf("a: %d open", st.Open)
	}
}

// Concurrent admissions cannot overrun a budget: each reserves its estimate under the
// controller's lock, so those admitted never reserve more than the budget.
func TestBudgetUnderConcurrency(t *testing.T) {
	t.Run("input tokens", func(t *testing.T) {
		h := newHarness(t, Enforce, withCap(budgeted(Budget{InputTokensPerMinute: 1000}), 100))
		var admitted, rejected atomic.Int64
		var wg sync.WaitGroup
		var mu sync.Mutex
		var tickets []*Ticket
		for range 50 {
			wg.Go(func() {
				tk, err := h.c.Admit(context.Background(), treq("a", 100))
				var rej *Rejection
				switch {
				case err == nil:
					admitted.Add(1)
					mu.Lock()
					tickets = append(tickets, tk)
					mu.Unlock()
				case errors.As(err, &rej) && rej.Reason == TenantInputTokens:
					rejected.Add(1)
				default:
					t.Errorf("Admit: %v", err)
				}
			})
		}
		wg.Wait()
		if admitted.Load() != 10 || rejected.Load() != 40 {
			t.Fatalf("%d admitted, %d rejected; want 10 of 100 tokens in a budget of 1000", admitted.Load(), rejected.Load())
		}
		for _, tk := range tickets {
			tk.Done(ok)
		}
		if st := h.tenantStats("a"); st.Open != 0 || st.Quota.InputTokens.Remaining != 0 {
			t.Fatalf("a: %+v", st)
		}
	})
	t.Run("output tokens, refunded as they end", func(t *testing.T) {
		// 100 reserved each, 10 used: at most 10 open at once, and what they used in all
		// within the budget.
		h := newHarness(t, Enforce, withCap(budgeted(Budget{OutputTokensPerMinute: 1000}), 100))
		var open, most, admitted atomic.Int64
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 30 {
					tk, err := h.c.Admit(context.Background(), bounded("a", 1, 100))
					if err != nil {
						continue
					}
					admitted.Add(1)
					n := open.Add(1)
					for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
					}
					open.Add(-1)
					tk.Done(answered(10))
				}
			})
		}
		wg.Wait()
		if most.Load() > 10 || admitted.Load() > 91 {
			t.Fatalf("%d open at most, %d admitted; want at most 10 and 91 (10 tokens each of 1000, the last reserving 100)", most.Load(), admitted.Load())
		}
		if used := 1000 - h.tenantStats("a").Quota.OutputTokens.Remaining; used != 10*float64(admitted.Load()) {
			t.Fatalf("%v used, want %d×10", used, admitted.Load())
		}
	})
}

// Requests one after another whose prompts the estimate gets wrong: each reserves its
// estimate and is charged the engine's count, so those admitted use at most the budget
// and the last one's estimate error.
func TestBudgetEstimateError(t *testing.T) {
	h := newHarness(t, Enforce, budgeted(Budget{InputTokensPerMinute: 1000}))
	text := Request{Model: "m", Tenant: "a", Prompt: wire.PromptSize{TextBytes: 400, Prompts: 1}} // 100 tokens at 4 bytes each
	const actual = 134                                                                            // at 3 bytes a token
	used, worst := 0, 0
	for range 20 {
		tk, err := h.c.Admit(context.Background(), text)
		if err != nil {
			break
		}
		worst = max(worst, actual-tk.EstimatedTokens())
		used += actual
		tk.Done(measure.Result{Stream: true, Outcome: measure.OK, InputTokens: actual})
	}
	if used > 1000+worst || used <= 1000-actual {
		t.Fatalf("%d tokens used of 1000 (estimates off by %d at most)", used, worst)
	}
	if left := h.tenantStats("a").Quota.InputTokens.Remaining; left != max(1000-float64(used), 0) {
		t.Fatalf("%v left after %d used", left, used)
	}
}

// A request is charged what it used: a short answer gives back the rest of its
// reservation, a long one takes the excess, which later requests wait for.
func TestBudgetSettles(t *testing.T) {
	t.Run("a short answer is refunded", func(t *testing.T) {
		h := newHarness(t, Enforce, budgeted(Budget{OutputTokensPerMinute: 1000}))
		a, b := h.admitNow(bounded("a", 10, 400)), h.admitNow(bounded("a", 10, 400))
		defer b.Done(answered(400))
		h.rejectNow(bounded("a", 10, 400), TenantOutputTokens)
		a.Done(answered(10))
		if left := h.tenantStats("a").Quota.OutputTokens.Remaining; left != 590 {
			t.Fatalf("%v left, want 590", left)
		}
		h.admitNow(bounded("a", 10, 400)).Done(answered(400))
	})
	t.Run("a long answer charges the excess", func(t *testing.T) {
		h := newHarness(t, Enforce, budgeted(Budget{OutputTokensPerMinute: 1000}))
		h.admitNow(bounded("a", 10, 100)).Done(answered(900))
		rej := h.rejectNow(bounded("a", 10, 200), TenantOutputTokens)
		if rej.RetryAfter != 6*time.Second || rej.Quota.OutputTokens.Remaining != 100 {
			t.Fatalf("rejection %+v, want Retry-After 6s with 100 left", rej)
		}
		h.clock.Step(6 * time.Second)
		h.admitNow(bounded("a", 10, 200)).Done(answered(200))
	})
	t.Run("the engine's prompt count", func(t *testing.T) {
		h := newHarness(t, Enforce, budgeted(Budget{InputTokensPerMinute: 1000}))
		h.admitNow(treq("a", 100)).Done(measure.Result{Stream: true, Outcome: measure.OK, InputTokens: 700})
		if left := h.tenantStats("a").Quota.InputTokens.Remaining; left != 300 {
			t.Fatalf("%v left, want 300", left)
		}
	})
	t.Run("beyond a minute's worth", func(t *testing.T) {
		h := newHarness(t, Enforce, budgeted(Budget{OutputTokensPerMinute: 1000}))
		h.admitNow(bounded("a", 10, 1000)).Done(answered(1500))
		st := h.tenantStats("a").Quota.OutputTokens
		if st.Remaining != 0 || st.Reset != 90*time.Second {
			t.Fatalf("quota %+v, want nothing left for 90s", st)
		}
		if rej := h.rejectNow(bounded("a", 10, 500), TenantOutputTokens); rej.RetryAfter != time.Minute {
			t.Fatalf("Retry-After %v, want 1m: 500 below zero, then 500", rej.RetryAfter)
		}
	})
}

// A request that never ran gives back everything it reserved, its request too.
func TestBudgetUnreserve(t *testing.T) {
	full := Budget{RequestsPerMinute: 10, InputTokensPerMinute: 1000, OutputTokensPerMinute: 1000, MaxConcurrent: 5}
	cfg := func(edit func(*TierConfig)) Config {
		c := budgeted(full)
		edit(&c.Tiers[0])
		return c
	}
	capOne := func(tc *TierConfig) { tc.MaxInFlight, tc.MaxQueue = 1, 1 }
	batch := bounded("a", 100, 100)
	batch.Class = Batch
	tests := []struct {
		name   string
		cfg    Config
		opts   func(*Options)
		reason Reason
		turn   func(h *harness) *Rejection // turns a's request away
	}{
		{"tier rate", cfg(func(tc *TierConfig) { tc.Rate, tc.Burst = 1, 3 }), nil, TierRate, func(h *harness) *Rejection {
			defer h.admitNow(treq("b", 1)).Done(ok)
			return h.rejectNow(bounded("a", 100, 100), TierRate)
		}},
		{"no queue", cfg(func(tc *TierConfig) { tc.MaxInFlight, tc.MaxQueue = 1, 0 }), nil, QueueFull, func(h *harness) *Rejection {
			defer h.admitNow(treq("b", 1)).Done(ok)
			return h.rejectNow(bounded("a", 100, 100), QueueFull)
		}},
		{"queue full", cfg(capOne), nil, QueueFull, func(h *harness) *Rejection {
			running := h.admitNow(treq("b", 1))
			p := h.enqueue(treq("b", 1))
			defer func() { running.Done(ok); h.granted(p).Done(ok) }()
			return h.rejectNow(batch, QueueFull)
		}},
		{"predicted late", cfg(func(tc *TierConfig) { tc.MaxInFlight, tc.MaxQueue = 1, 10 }), nil, PredictedLate, func(h *harness) *Rejection {
			running := h.admitNow(treq("b", 1))
			// A fair queue: a would wait behind one of each other tenant's, 3s at 1/s.
			ws := waiters{h.enqueue(treq("b", 1)), h.enqueue(treq("b", 1)), h.enqueue(treq("x", 1))}
			defer func() { h.serve(running, &ws, 3, ok) }()
			return h.rejectNow(bounded("a", 100, 100), PredictedLate)
		}},
		{"shed", cfg(capOne), nil, Shed, func(h *harness) *Rejection {
			running := h.admitNow(treq("b", 1))
			p := h.enqueue(batch)
			q := h.admitAsync(treq("b", 1), 1)
			defer func() { running.Done(ok); h.granted(q).Done(ok) }()
			return h.refused(p, Shed)
		}},
		{"timed out", cfg(capOne), nil, QueueTimeout, func(h *harness) *Rejection {
			running := h.admitNow(treq("b", 1))
			defer running.Done(ok)
			p := h.enqueue(bounded("a", 100, 100))
			h.clock.Step(2 * time.Second)
			h.c.Tick()
			return h.refused(p, QueueTimeout)
		}},
		{"client gone", cfg(capOne), nil, ClientGone, func(h *harness) *Rejection {
			running := h.admitNow(treq("b", 1))
			defer running.Done(ok)
			p := h.enqueue(bounded("a", 100, 100))
			p.cancel()
			return h.refused(p, ClientGone)
		}},
		{"engine down", cfg(capOne), func(o *Options) { o.Saturation.FailClosed = true }, EngineDown, func(h *harness) *Rejection {
			running := h.admitNow(treq("b", 1))
			defer running.Done(ok)
			p := h.enqueue(bounded("a", 100, 100))
			h.eng.Set(engine.NewSnapshot())
			h.c.Tick()
			return h.refused(p, EngineDown)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts []func(*Options)
			if tt.opts != nil {
				opts = append(opts, tt.opts)
			}
			h := newHarness(t, Enforce, tt.cfg, opts...)
			h.serveAtOneASecond(4) // a service rate of 1/s, for the predicted wait
			start := h.clock.Now()
			a := h.admitNow(bounded("a", 100, 100)) // one request of a's that runs
			a.Done(answered(100))
			rej := tt.turn(h)
			// What is left is what a's first request left, refilled since: its
			// turned-away request took nothing.
			left := func(limit, used float64) float64 {
				return min(limit, limit-used+limit*h.clock.Now().Sub(start).Minutes())
			}
			want := [3]float64{left(10, 1), left(1000, 100), left(1000, 100)}
			near := func(q Quota) bool {
				got := [3]float64{q.Requests.Remaining, q.InputTokens.Remaining, q.OutputTokens.Remaining}
				for i := range got {
					if d := got[i] - want[i]; d > 1e-9 || d < -1e-9 {
						return false
					}
				}
				return true
			}
			if tt.reason != ClientGone && (rej.Tenant != "a" || !near(rej.Quota)) {
				t.Fatalf("rejection of %q with quota %+v, want a's with %v left", rej.Tenant, rej.Quota, want)
			}
			if st := h.tenantStats("a"); st.Open != 0 || !near(st.Quota) {
				t.Fatalf("a after its request %s: %d open, quota %+v; want none open, %v left", tt.reason, st.Open, st.Quota, want)
			}
		})
	}
}

// Requests without max_tokens reserve the tenant's mean output, learned from those that
// ended well.
func TestLearnedOutput(t *testing.T) {
	h := newHarness(t, Enforce, budgeted(Budget{OutputTokensPerMinute: 1e6}))
	// reserves returns what r reserves of its tenant's output budget; the request ends
	// cancelled, which teaches nothing.
	reserves := func(r Request) float64 {
		t.Helper()
		before := h.tenantStats(r.Tenant).Quota.OutputTokens.Remaining
		tk := h.admitNow(r)
		defer tk.Done(measure.Result{Stream: true, Outcome: measure.ClientCancelled, OutputTokens: 1})
		return before - tk.Quota().OutputTokens.Remaining
	}
	near := func(got, want float64) bool { return got-want < 1e-6 && want-got < 1e-6 }
	if got := reserves(treq("a", 10)); got != defaultMeanOutput {
		t.Fatalf("first request reserves %v, want %d", got, defaultMeanOutput)
	}
	h.admitNow(treq("a", 10)).Done(answered(100))
	if got, want := reserves(treq("a", 10)), 0.9*defaultMeanOutput+10; !near(got, want) {
		t.Fatalf("after one answer of 100 tokens: %v reserved, want %v", got, want)
	}
	for range 60 {
		h.admitNow(treq("a", 10)).Done(answered(100))
	}
	mean := reserves(treq("a", 10))
	if mean < 100 || mean > 101 {
		t.Fatalf("after 60 answers of 100 tokens: %v reserved, want about 100", mean)
	}
	// Requests with max_tokens, and failures, do not teach it.
	h.admitNow(bounded("a", 10, 5000)).Done(answered(5000))
	h.admitNow(treq("a", 10)).Done(measure.Result{Stream: true, Outcome: measure.EngineError, OutputTokens: 3000})
	if got := reserves(treq("a", 10)); !near(got, mean) {
		t.Fatalf("%v reserved, want %v still", got, mean)
	}
	if got := reserves(bounded("a", 10, 42)); got != 42 {
		t.Fatalf("a bounded request reserves %v, want its bound 42", got)
	}
	if got := reserves(treq("b", 10)); got != 0 {
		t.Fatalf("b, without a budget, reserves %v", got)
	}
}

// In shadow mode a request over its budget is recorded as rejected and let through,
// reserving nothing.
func TestBudgetShadow(t *testing.T) {
	h := newHarness(t, Shadow, budgeted(Budget{InputTokensPerMinute: 1000, MaxConcurrent: 2}))
	first := h.admitNow(treq("a", 600))
	over := h.admitNow(treq("a", 600))
	wantTenantDecision(t, h.rec.last(t), Decision{Tenant: "a", Verdict: Rejected, Reason: TenantInputTokens, Shadow: true})
	if over.Tenant() != "a" || over.Quota().InputTokens.Remaining != 400 {
		t.Fatalf("the ticket let through: tenant %q, quota %+v", over.Tenant(), over.Quota())
	}
	if st := h.tenantStats("a"); st.Open != 1 || st.Quota.InputTokens.Remaining != 400 {
		t.Fatalf("a: %d open, %v left; want 1 and 400 (nothing reserved for the shadow-rejected)", st.Open, st.Quota.InputTokens.Remaining)
	}
	third := h.admitNow(treq("a", 100)) // fits; open 2
	fourth := h.admitNow(treq("a", 100))
	wantTenantDecision(t, h.rec.last(t), Decision{Tenant: "a", Verdict: Rejected, Reason: TenantConcurrency, Shadow: true})
	over.Done(measure.Result{Stream: true, Outcome: measure.OK, InputTokens: 600})
	fourth.Done(ok)
	if st := h.tenantStats("a"); st.Open != 2 || st.Quota.InputTokens.Remaining != 300 {
		t.Fatalf("a: %d open, %v left; want 2 and 300", st.Open, st.Quota.InputTokens.Remaining)
	}
	first.Done(ok)
	third.Done(ok)
	if st := h.tenantStats("a"); st.Open != 0 {
		t.Fatalf("a: %d open", st.Open)
	}
}

// A reload keeps the live state of every tenant that keeps its name: its counter and
// what is left of its budgets.
func TestReloadKeepsTenants(t *testing.T) {
	named := func(budget float64, extra ...TenantConfig) Config {
		return tenantsConfig(append([]TenantConfig{{Name: "a", Budget: Budget{InputTokensPerMinute: budget}}}, extra...))
	}
	h := newHarness(t, Enforce, named(1000))
	h.admitNow(treq("a", 300)).Done(answered(100))
	before := h.tenantStats("a")
	if before.Counter != 500 || before.Quota.InputTokens.Remaining != 700 {
		t.Fatalf("a before: %+v", before)
	}
	if err := h.c.Reload(named(1000, TenantConfig{Name: "b"})); err != nil {
		t.Fatal(err)
	}
	if after := h.tenantStats("a"); after != before {
		t.Fatalf("a after a reload that keeps it:\n%+v\nwant\n%+v", after, before)
	}
	if err := h.c.Reload(named(2000, TenantConfig{Name: "b"})); err != nil {
		t.Fatal(err)
	}
	if after := h.tenantStats("a"); after.Counter != 500 || after.Quota.InputTokens.Remaining != 1400 {
		t.Fatalf("a after its budget doubled: %+v; want its counter and the share left (70%%) kept", after)
	}
	renamed := tenantsConfig([]TenantConfig{{Name: "a2", Match: []string{"a"}, Budget: Budget{InputTokensPerMinute: 1000}}})
	if err := h.c.Reload(renamed); err != nil {
		t.Fatal(err)
	}
	if got := h.c.Tenant(http.Header{"X-Tenant": {"a"}}); got != "a2" {
		t.Fatalf("a's identity is now %q's", got)
	}
	if st := h.tenantStats("a2"); st.Counter != 0 || st.Quota.InputTokens.Remaining != 1000 {
		t.Fatalf("a renamed starts afresh: %+v", st)
	}
}

// A tiers file with a broken tenants section leaves the tenants in force.
func TestReloaderKeepsTenantsOfABrokenFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tiers.yaml")
	t1 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	good := "tiers: [{name: t, max_in_flight: 1}]\ntenants:\n  identify: {header: X-Tenant}\n  named: [{name: a, budget: {requests_per_minute: 10}}]\n"
	writeTiers(t, path, good, t1)
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, Enforce, cfg)
	r := NewReloader(path, h.c)
	h.admitNow(treq("a", 1)).Done(ok)
	before := h.c.Stats().Tenants
	broken := strings.Replace(good, "named: [{name: a,", "named: [{name: b}, {name: b,", 1)
	writeTiers(t, path, broken, t1.Add(time.Second))
	if err := r.Reload(); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "duplicate name") {
		t.Fatalf("Reload = %v, want the duplicate name", err)
	}
	if r.Status().OK {
		t.Fatal("status OK after a broken file")
	}
	if got := h.c.Tenant(http.Header{"X-Tenant": {"a"}}); got != "a" {
		t.Fatalf("a resolves to %q after a failed reload", got)
	}
	after := h.c.Stats().Tenants
	if len(after) != 2 || after[0] != before[0] || after[0].Quota.Requests.Remaining != 9 {
		t.Fatalf("tenants after a failed reload %+v, want %+v", after, before)
	}
	if c := h.c.Config(); c.Tenants == nil || c.Tenants.Named[0].Name != "a" {
		t.Fatalf("config in force %+v", c.Tenants)
	}
}

func TestQuotaTokens(t *testing.T) {
	in := Allowance{Limit: 1000, Remaining: 500}
	out := Allowance{Limit: 100, Remaining: 20}
	tests := []struct {
		name string
		q    Quota
		want Allowance
	}{
		{"none", Quota{}, Allowance{}},
		{"input only", Quota{InputTokens: in}, in},
		{"output only", Quota{OutputTokens: out}, out},
		{"output binds (20% left)", Quota{InputTokens: in, OutputTokens: out}, out},
		{"input binds", Quota{InputTokens: Allowance{Limit: 1000, Remaining: 100}, OutputTokens: out}, Allowance{Limit: 1000, Remaining: 100}},
		{"requests do not count", Quota{Requests: Allowance{Limit: 1}}, Allowance{}},
	}
	for _, tt := range tests {
		if got := tt.q.Tokens(); got != tt.want {
			t.Errorf("%s: Tokens() = %+v, want %+v", tt.name, got, tt.want)
		}
	}
	if (Quota{}).Set() || !(Quota{Requests: Allowance{Limit: 1}}).Set() || (Allowance{}).Set() {
		t.Error("Set")
	}
}

// Clients of several tenants admit, leave and finish concurrently while time moves and
// reloads change the tenants (a budget, a tenant removed, the section gone and back):
// afterwards no tenant has a request open or waiting, and none is charged for more than
// it may be. Run with -race.
func TestTenantsUnderConcurrency(t *testing.T) {
	for _, mode := range []Mode{Enforce, Shadow} {
		t.Run(mode.String(), func(t *testing.T) {
			budget := Budget{RequestsPerMinute: 600, InputTokensPerMinute: 20000, OutputTokensPerMinute: 4000, MaxConcurrent: 3}
			configs := []Config{
				tenantsConfig([]TenantConfig{{Name: "a", Weight: 2, Budget: budget}, {Name: "b", MaxClass: "batch", Budget: budget}, {Name: "c"}}),
				tenantsConfig([]TenantConfig{{Name: "a", Budget: Budget{MaxConcurrent: 1}}, {Name: "c"}}),
				withQueue(tierConfig(), 8),
			}
			for i := range configs {
				configs[i] = withCap(configs[i], 2)
			}
			h := newHarness(t, mode, configs[0])
			var wg sync.WaitGroup
			var granted atomic.Int64
			for i := range 12 {
				wg.Go(func() {
					for j := range 40 {
						ctx, cancel := context.WithCancel(context.Background())
						if (i+j)%7 == 0 {
							cancel()
						}
						r := bounded(string(rune('a'+i%4)), 10+j%50, (i*j)%300)
						r.Class = Class((i + j) % 2)
						if tk, err := h.c.Admit(ctx, r); err == nil {
							granted.Add(1)
							tk.Output(j % 20)
							h.holdFor(time.Duration(j%5) * 10 * time.Millisecond)
							tk.Done(answered(j % 400))
						}
						cancel()
					}
				})
			}
			seen := map[*tenantState]bool{} // every tenant's state, those reloads dropped too
			remember := func() {
				h.c.mu.Lock()
				defer h.c.mu.Unlock()
				if h.c.ten != nil {
					for _, ts := range h.c.ten.all {
						seen[ts] = true
					}
				}
			}
			remember()
			ctx, stop := context.WithCancel(context.Background())
			var ticker sync.WaitGroup
			ticker.Go(func() { // time moves in steps of 10ms; every tenth, a reload
				for i := 1; ctx.Err() == nil; i++ {
					h.clock.Step(10 * time.Millisecond)
					if i%10 == 0 {
						_ = h.c.Reload(configs[i/10%len(configs)])
						remember()
					}
					h.c.Tick()
				}
			})
			wg.Wait()
			stop()
			ticker.Wait()
			if granted.Load() == 0 {
				t.Fatal("nothing granted")
			}
			h.c.mu.Lock()
			defer h.c.mu.Unlock()
			t.Logf("%d tenant states, %d requests granted", len(seen), granted.Load())
			for ts := range seen {
				if ts.active != 0 || ts.queued != 0 {
					t.Errorf("tenant %s: %d open, %d queued", ts.cfg.Name, ts.active, ts.queued)
				}
				for _, b := range []*bucket{&ts.requests, &ts.inputTok, &ts.outputTok} {
					if b.level > b.perMinute {
						t.Errorf("tenant %s: a bucket holds %v of %v", ts.cfg.Name, b.level, b.perMinute)
					}
				}
			}
		})
	}
}

// In shadow mode a request enforce would have held in the queue runs at once; when
// enforce would have turned it away from there (its wait ran out), it gives back its
// reservation as enforce would have, and its end settles nothing more.
func TestBudgetShadowQueueTimeout(t *testing.T) {
	h := newHarness(t, Shadow, withCap(budgeted(Budget{InputTokensPerMinute: 1000}), 1))
	first := h.admitNow(treq("a", 300))
	queued := h.admitNow(treq("a", 300)) // enforce would queue it behind first
	if d := h.rec.last(t); d.Verdict != Queued || !d.Shadow {
		t.Fatalf("second decision %+v, want queued in shadow", d)
	}
	if st := h.tenantStats("a"); st.Quota.InputTokens.Remaining != 400 {
		t.Fatalf("%v left with both reserved, want 400", st.Quota.InputTokens.Remaining)
	}
	h.clock.Step(3 * time.Second) // past the tier's wait of 2s; the bucket refills 50
	h.c.Tick()
	if st := h.tenantStats("a"); st.Open != 1 || st.Quota.InputTokens.Remaining != 750 {
		t.Fatalf("after the virtual waiter timed out: %d open, %v left; want 1 and 750 (its 300 back)", st.Open, st.Quota.InputTokens.Remaining)
	}
	queued.Done(measure.Result{Stream: true, Outcome: measure.OK, InputTokens: 300})
	first.Done(measure.Result{Stream: true, Outcome: measure.OK, InputTokens: 300})
	if st := h.tenantStats("a"); st.Open != 0 || st.Quota.InputTokens.Remaining != 750 {
		t.Fatalf("after both ended: %d open, %v left; want 0 and 750", st.Open, st.Quota.InputTokens.Remaining)
	}
}

// slogate's own probes belong to no tenant, whatever tenant they name: nothing is
// reserved or charged, and neither the ticket nor the decision names one.
func TestProbeHasNoTenant(t *testing.T) {
	h := newHarness(t, Enforce, budgeted(Budget{RequestsPerMinute: 1}))
	r := treq("a", 10)
	r.Class = Probe
	tk := h.admitNow(r)
	if tk.Tenant() != "" || h.rec.last(t).Tenant != "" {
		t.Fatalf("a probe's ticket names tenant %q, its decision %q", tk.Tenant(), h.rec.last(t).Tenant)
	}
	if st := h.tenantStats("a"); st.Open != 0 || st.Quota.Requests.Remaining != 1 {
		t.Fatalf("a: %d open, %v requests left after a probe; want 0 and 1", st.Open, st.Quota.Requests.Remaining)
	}
	tk.Done(ok)
}
