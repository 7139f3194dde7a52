package status

import (
	"math"
	"sync"
	"testing"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/clock"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/wire"
)

// epoch is where fake clocks start, far from the wall clock.
var epoch = time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)

const ms = time.Millisecond

// stream is a streamed request of tier that ended ok with output.
func stream(tier string, ttft, tpot time.Duration) measure.Result {
	return measure.Result{Tier: tier, Stream: true, Outcome: measure.OK, OutputChunks: 8, TTFT: ttft, TPOT: tpot}
}

func ended(tier string, o measure.Outcome) measure.Result {
	return measure.Result{Tier: tier, Stream: true, Outcome: o}
}

var (
	sloShort = measure.NewSLO(100*ms, 10*ms)
	sloLong  = measure.NewSLO(time.Second, 20*ms)
	sloDef   = measure.NewSLO(2*time.Second, 100*ms)
	tiersSL  = []admission.TierStats{{Name: "short", SLO: sloShort}, {Name: "long", SLO: sloLong}}
)

// step advances the clock by after, then feeds res to the window (if any).
type step struct {
	after time.Duration
	res   *measure.Result
}

func at(r measure.Result) step { return step{res: &r} }

// TestWindowSummary: per tier and over all, the window counts requests by outcome,
// judges ok streams by their tier's SLO (queue wait counting towards TTFT), and forgets
// requests older than its span or beyond its capacity.
func TestWindowSummary(t *testing.T) {
	queued := stream("short", 60*ms, 5*ms)
	queued.QueueWait = 50 * ms // 110 ms felt: over short's 100 ms
	nonStream := measure.Result{Tier: "short", Outcome: measure.OK, OutputChunks: 1}
	cases := []struct {
		name     string
		capacity int
		steps    []step
		want     map[string]Live // by tier; "all" is the total
	}{
		{name: "empty", want: map[string]Live{
			"short": {Tier: "short", SLO: sloShort}, "long": {Tier: "long", SLO: sloLong}, "all": {SLO: sloDef},
		}},
		{name: "judged by each tier's SLO", steps: []step{
			at(stream("short", 50*ms, 5*ms)), at(stream("short", 150*ms, 5*ms)), at(stream("short", 50*ms, 15*ms)),
			at(queued), at(nonStream),
			at(stream("long", 150*ms, 15*ms)), at(stream("long", 900*ms, 0)),
		}, want: map[string]Live{
			"short": {Tier: "short", SLO: sloShort, Requests: 5, Judged: 4, Met: 1, P95TTFT: 150 * ms, P95TPOT: 15 * ms},
			"long":  {Tier: "long", SLO: sloLong, Requests: 2, Judged: 2, Met: 2, P95TTFT: 900 * ms, P95TPOT: 15 * ms},
			"all":   {SLO: sloDef, Requests: 7, Judged: 6, Met: 3, P95TTFT: 900 * ms, P95TPOT: 15 * ms},
		}},
		{name: "outcomes counted, not judged", steps: []step{
			at(ended("long", measure.UpstreamError)), at(ended("long", measure.AbortedMidstream)), at(ended("long", measure.EngineError)),
			at(ended("long", measure.Rejected)), at(ended("long", measure.ClientCancelled)), at(ended("long", measure.BadRequest)),
		}, want: map[string]Live{
			"short": {Tier: "short", SLO: sloShort},
			"long":  {Tier: "long", SLO: sloLong, Requests: 6, Failed: 3, Rejected: 1, Cancelled: 1},
			"all":   {SLO: sloDef, Requests: 6, Failed: 3, Rejected: 1, Cancelled: 1},
		}},
		{name: "unclassified and unknown tiers take the default SLO", steps: []step{
			at(stream("", 1500*ms, 50*ms)), at(stream("gone", 3*time.Second, 50*ms)),
		}, want: map[string]Live{
			"short": {Tier: "short", SLO: sloShort}, "long": {Tier: "long", SLO: sloLong},
			"":     {SLO: sloDef, Requests: 1, Judged: 1, Met: 1, P95TTFT: 1500 * ms, P95TPOT: 50 * ms},
			"gone": {Tier: "gone", SLO: sloDef, Requests: 1, Judged: 1, P95TTFT: 3 * time.Second, P95TPOT: 50 * ms},
			"all":  {SLO: sloDef, Requests: 2, Judged: 2, Met: 1, P95TTFT: 3 * time.Second, P95TPOT: 50 * ms},
		}},
		{name: "older than the span forgotten, the span covered", steps: []step{
			at(stream("short", 500*ms, 5*ms)), {after: 3 * time.Minute, res: ptr(stream("short", 50*ms, 5*ms))},
			{after: 2*time.Minute + ms},
		}, want: map[string]Live{
			"short": {Tier: "short", SLO: sloShort, Requests: 1, Judged: 1, Met: 1, P95TTFT: 50 * ms, P95TPOT: 5 * ms, Covered: 5 * time.Minute},
			"long":  {Tier: "long", SLO: sloLong, Covered: 5 * time.Minute},
			"all":   {SLO: sloDef, Requests: 1, Judged: 1, Met: 1, P95TTFT: 50 * ms, P95TPOT: 5 * ms, Covered: 5 * time.Minute},
		}},
		{name: "the time since the window started covered", steps: []step{
			{after: 4 * time.Second, res: ptr(ended("short", measure.Rejected))}, {after: 6 * time.Second},
		}, want: map[string]Live{
			"short": {Tier: "short", SLO: sloShort, Requests: 1, Rejected: 1, Covered: 10 * time.Second},
			"long":  {Tier: "long", SLO: sloLong, Covered: 10 * time.Second},
			"all":   {SLO: sloDef, Requests: 1, Rejected: 1, Covered: 10 * time.Second},
		}},
		{name: "beyond the capacity forgotten, covered from the oldest kept", capacity: 2, steps: []step{
			at(stream("long", 5*time.Second, 5*ms)), {after: time.Second, res: ptr(stream("short", 10*ms, 5*ms))},
			{after: 2 * time.Second, res: ptr(stream("short", 20*ms, 5*ms))}, {after: time.Second},
		}, want: map[string]Live{
			"short": {Tier: "short", SLO: sloShort, Requests: 2, Judged: 2, Met: 2, P95TTFT: 20 * ms, P95TPOT: 5 * ms, Covered: 3 * time.Second},
			"long":  {Tier: "long", SLO: sloLong, Covered: 3 * time.Second},
			"all":   {SLO: sloDef, Requests: 2, Judged: 2, Met: 2, P95TTFT: 20 * ms, P95TPOT: 5 * ms, Covered: 3 * time.Second},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := replay(tc.capacity, tc.steps)
			byTier, all := w.Summary(tiersSL, sloDef)
			got := map[string]Live{"all": all}
			for i, l := range byTier {
				got[l.Tier] = l
				if i < len(tiersSL) && l.Tier != tiersSL[i].Name {
					t.Errorf("tier %d is %q, want %q: the tiers in force first, in order", i, l.Tier, tiersSL[i].Name)
				}
			}
			if len(got) != len(tc.want) {
				t.Errorf("tiers %v, want %d", keys(got), len(tc.want))
			}
			for name, want := range tc.want {
				g := got[name]
				if want.Attainment = math.NaN(); want.Judged > 0 {
					want.Attainment = float64(want.Met) / float64(want.Judged)
				}
				if !sameLive(g, want) {
					t.Errorf("tier %q:\n got %+v\nwant %+v", name, g, want)
				}
			}
		})
	}
}

func ptr(r measure.Result) *measure.Result { return &r }

// replay returns a window of the capacity (0: the default) that started at epoch on a
// fake clock, after the steps.
func replay(capacity int, steps []step) *Window {
	clk := clock.NewFake(epoch)
	w := NewWindow(WindowOptions{Capacity: capacity, Clock: clk})
	for _, s := range steps {
		clk.Step(s.after)
		if s.res != nil {
			w.Observe(wire.Request{}, *s.res)
		}
	}
	return w
}

// sameLive compares summaries, NaN attainments as equal.
func sameLive(a, b Live) bool {
	if math.IsNaN(a.Attainment) && math.IsNaN(b.Attainment) {
		a.Attainment, b.Attainment = 0, 0
	}
	return a == b
}

func keys(m map[string]Live) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestWindowConcurrent: requests observed from many goroutines while the page reads
// summaries are all counted (run with -race).
func TestWindowConcurrent(t *testing.T) {
	w := NewWindow(WindowOptions{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				w.Observe(wire.Request{}, stream([]string{"short", "long"}[(g+i)%2], 10*ms, ms))
				if i%50 == 0 {
					w.Summary(tiersSL, sloDef)
				}
			}
		})
	}
	wg.Wait()
	if _, all := w.Summary(tiersSL, sloDef); all.Requests != 1600 || all.Judged != 1600 {
		t.Errorf("counted %d requests, %d judged; want 1600", all.Requests, all.Judged)
	}
}

// TestWindowObserveAllocates: recording a request allocates nothing, so the proxy's
// observers stay cheap.
func TestWindowObserveAllocates(t *testing.T) {
	w := NewWindow(WindowOptions{Capacity: 16})
	res := stream("short", 10*ms, ms)
	if n := testing.AllocsPerRun(100, func() { w.Observe(wire.Request{}, res) }); n != 0 {
		t.Errorf("Observe allocates %v times, want 0", n)
	}
}

// of is res of tenant.
func of(tenant string, res measure.Result) measure.Result {
	res.Tenant = tenant
	return res
}

// TestWindowByTenant: per tenant, the window lists the tenants in force in their order
// (even without requests), then one row each for the requests of no tenant and of
// tenants no longer in force; judges each request by its own tier's SLO; and counts
// goodput over the time it covers — since it started, its span, or since the oldest
// request it kept at its capacity.
func TestWindowByTenant(t *testing.T) {
	names := []string{"acme", "beta", "other"}
	nan := math.NaN()
	cases := []struct {
		name     string
		capacity int
		steps    []step
		covered  time.Duration // of every row
		want     []TenantLive
	}{
		{name: "empty: the tenants in force, no time covered", want: []TenantLive{
			{Tenant: "acme", Goodput: nan}, {Tenant: "beta", Goodput: nan}, {Tenant: "other", Goodput: nan},
		}},
		{name: "judged by each request's tier, over the time since the window started", steps: []step{
			at(of("acme", stream("short", 150*ms, 5*ms))),  // over short's 100 ms
			at(of("acme", stream("long", 150*ms, 5*ms))),   // within long's 1 s
			at(of("beta", stream("gone", 1500*ms, 50*ms))), // an unknown tier: the default 2 s
			at(of("beta", ended("short", measure.Rejected))),
			{after: 10 * time.Second},
		}, covered: 10 * time.Second, want: []TenantLive{
			{Tenant: "acme", Live: Live{Requests: 2, Judged: 2, Met: 1, P95TTFT: 150 * ms, P95TPOT: 5 * ms}, Goodput: 0.1},
			{Tenant: "beta", Live: Live{Requests: 2, Judged: 1, Met: 1, Rejected: 1, P95TTFT: 1500 * ms, P95TPOT: 50 * ms}, Goodput: 0.1},
			{Tenant: "other", Goodput: 0},
		}},
		{name: "no tenant and tenants no longer in force, one row each", steps: []step{
			at(of("", ended("short", measure.BadRequest))),
			at(of("retired", stream("short", 50*ms, 5*ms))), at(of("renamed", stream("short", 50*ms, 5*ms))),
			at(of("other", ended("long", measure.ClientCancelled))),
			{after: 20 * time.Second},
		}, covered: 20 * time.Second, want: []TenantLive{
			{Tenant: "acme"}, {Tenant: "beta"},
			{Tenant: "other", Live: Live{Requests: 1, Cancelled: 1}},
			{Live: Live{Requests: 1}},
			{Former: true, Live: Live{Requests: 2, Judged: 2, Met: 2, P95TTFT: 50 * ms, P95TPOT: 5 * ms}, Goodput: 0.1},
		}},
		{name: "older than the span forgotten, goodput over the span", steps: []step{
			at(of("acme", stream("short", 50*ms, 5*ms))), {after: 6 * time.Minute},
			at(of("acme", stream("short", 50*ms, 5*ms))), at(of("acme", stream("short", 50*ms, 5*ms))),
			at(of("acme", stream("short", 50*ms, 5*ms))),
		}, covered: 5 * time.Minute, want: []TenantLive{
			{Tenant: "acme", Live: Live{Requests: 3, Judged: 3, Met: 3, P95TTFT: 50 * ms, P95TPOT: 5 * ms}, Goodput: 0.01},
			{Tenant: "beta"}, {Tenant: "other"},
		}},
		{name: "at its capacity, goodput since the oldest request kept", capacity: 2, steps: []step{
			{after: time.Minute, res: ptr(of("acme", stream("short", 50*ms, 5*ms)))},
			{after: 10 * time.Second, res: ptr(of("acme", stream("short", 50*ms, 5*ms)))},
			{after: 10 * time.Second, res: ptr(of("beta", stream("short", 50*ms, 5*ms)))},
			{after: 10 * time.Second},
		}, covered: 20 * time.Second, want: []TenantLive{
			{Tenant: "acme", Live: Live{Requests: 1, Judged: 1, Met: 1, P95TTFT: 50 * ms, P95TPOT: 5 * ms}, Goodput: 0.05},
			{Tenant: "beta", Live: Live{Requests: 1, Judged: 1, Met: 1, P95TTFT: 50 * ms, P95TPOT: 5 * ms}, Goodput: 0.05},
			{Tenant: "other"},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := replay(tc.capacity, tc.steps)
			got := w.ByTenant(names, tiersSL, sloDef)
			if len(got) != len(tc.want) {
				t.Fatalf("%d rows %+v, want %d", len(got), got, len(tc.want))
			}
			for i, want := range tc.want {
				want.Covered = tc.covered
				if want.Attainment = math.NaN(); want.Judged > 0 {
					want.Attainment = float64(want.Met) / float64(want.Judged)
				}
				if !sameTenantLive(got[i], want) {
					t.Errorf("row %d:\n got %+v\nwant %+v", i, got[i], want)
				}
			}
		})
	}
}

// sameTenantLive compares tenant summaries, NaNs as equal and goodputs to within a
// rounding error.
func sameTenantLive(a, b TenantLive) bool {
	ga, gb := a.Goodput, b.Goodput
	a.Goodput, b.Goodput = 0, 0
	switch {
	case math.IsNaN(ga) || math.IsNaN(gb):
		if math.IsNaN(ga) != math.IsNaN(gb) {
			return false
		}
	case math.Abs(ga-gb) > 1e-9:
		return false
	}
	return a.Tenant == b.Tenant && a.Former == b.Former && sameLive(a.Live, b.Live)
}
