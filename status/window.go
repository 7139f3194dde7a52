package status

import (
	"math"
	"slices"
	"sync"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/clock"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/wire"
)

// Window defaults.
const (
	// DefaultSpan is how far back a Window looks.
	DefaultSpan = 5 * time.Minute
	// DefaultCapacity is how many requests a Window keeps at most.
	DefaultCapacity = 4096
)

// Window keeps the most recent live requests' measurements, compactly and in bounded
// memory (Capacity records of a few words each, however much traffic passes), and
// summarises them per tier and per tenant for the status page. It has the method set of
// proxy.Observer. Safe for concurrent use.
type Window struct {
	span  time.Duration
	clock clock.Clock
	since time.Time // when it started keeping requests

	mu   sync.Mutex
	ring []record // ring[next] is the oldest once the ring is full
	next int
	full bool
}

// record is what the status page needs of one request.
type record struct {
	end        time.Time // when the response ended
	tier       string
	tenant     string // measure.Result.Tenant: one of admission's bounded names, or ""
	outcome    measure.Outcome
	judged     bool          // a stream that ended ok with output: SLOs apply
	ttft, tpot time.Duration // measure.ClientLatency: TTFT queue wait included; TPOT 0: n/a
}

// WindowOptions configure a Window; zero values take the defaults.
type WindowOptions struct {
	Span     time.Duration // how far back summaries look; default DefaultSpan
	Capacity int           // most requests kept; default DefaultCapacity
	Clock    clock.Clock   // default clock.Real
}

// NewWindow returns an empty Window.
func NewWindow(o WindowOptions) *Window {
	if o.Span <= 0 {
		o.Span = DefaultSpan
	}
	if o.Capacity <= 0 {
		o.Capacity = DefaultCapacity
	}
	clk := clock.Or(o.Clock)
	return &Window{span: o.Span, clock: clk, since: clk.Now(), ring: make([]record, o.Capacity)}
}

var _ LiveSource = (*Window)(nil)

// Span returns how far back the window's summaries look.
func (w *Window) Span() time.Duration { return w.span }

// Capacity returns how many requests the window keeps at most.
func (w *Window) Capacity() int { return len(w.ring) }

// Observe records one finished request. It takes a short lock, never blocks otherwise
// and does not allocate.
func (w *Window) Observe(_ wire.Request, res measure.Result) {
	r := record{end: w.clock.Now(), tier: res.Tier, tenant: res.Tenant, outcome: res.Outcome}
	r.ttft, r.tpot, r.judged = measure.ClientLatency(res)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ring[w.next] = r
	w.next++
	if w.next == len(w.ring) {
		w.next, w.full = 0, true
	}
}

// Live is one tier's recent live traffic: the requests that ended within the window's
// span (at most its capacity). A request is judged by the SLOs when it was a stream
// that ended ok with output, as the SLO alerting rules count.
type Live struct {
	Tier       string        // "" for requests admission did not classify
	SLO        measure.SLO   // the SLO the requests were judged by
	Requests   int           // every outcome
	Judged     int           // streams that ended ok with output
	Met        int           // judged requests that met the SLO as the client saw it (measure.SLO.MetByClient)
	P95TTFT    time.Duration // of judged requests, queue wait included; 0 unknown
	P95TPOT    time.Duration // of judged requests with two tokens or more; 0 unknown
	Failed     int           // the engine failed them: upstream errors, timeouts, broken streams
	Rejected   int           // admission turned them away
	Cancelled  int           // the client went away first
	Attainment float64       // Met / Judged; NaN when nothing was judged
	// Covered is how long a time the requests were counted over: the window's span, or
	// less when the window started later or is at its capacity (it covers its requests
	// from the oldest it kept); 0 while it covers no time.
	Covered time.Duration
}

// PerSecond returns n requests per second of the time l covers: l.PerSecond(l.Met) is
// the goodput, l.PerSecond(l.Requests) the load offered (every outcome, rejected
// requests included, each counted when it ended). NaN while l covers no time.
func (l Live) PerSecond(n int) float64 {
	if l.Covered <= 0 {
		return math.NaN()
	}
	return float64(n) / l.Covered.Seconds()
}

// Summary summarises the window per tier as of now: first the given tiers in their
// order (each judged by its own SLO, listed even without requests), then any other tier
// seen, in the order first seen, judged by def ("" is the requests admission did not
// classify). all is every request together, each judged by its own tier's SLO.
func (w *Window) Summary(tiers []admission.TierStats, def measure.SLO) (byTier []Live, all Live) {
	var order []*tally
	index := map[string]*tally{}
	get := func(name string, slo measure.SLO) *tally {
		if t, ok := index[name]; ok {
			return t
		}
		t := &tally{Live: Live{Tier: name, SLO: slo}}
		index[name] = t
		order = append(order, t)
		return t
	}
	for _, t := range tiers {
		get(t.Name, t.SLO)
	}
	sum := &tally{Live: Live{SLO: def}}
	recent, covered := w.recent()
	for _, r := range recent {
		t := get(r.tier, def)
		t.add(r, t.SLO)
		sum.add(r, t.SLO)
	}
	byTier = make([]Live, len(order))
	for i, t := range order {
		byTier[i] = t.live(covered)
	}
	return byTier, sum.live(covered)
}

// TenantLive is one tenant's recent live traffic. Each of its requests is judged by its
// own tier's SLO, so Live.Tier is "" and Live.SLO the zero SLO.
type TenantLive struct {
	Tenant string // "" for the requests no tenant was named for (see ByTenant)
	Former bool   // the requests of every tenant no longer in force, together
	Live
	// Goodput is the judged requests that met their SLO per second of the time the
	// window covers, Live.PerSecond(Met); NaN while it covers no time.
	Goodput float64
}

// ByTenant summarises the window per tenant as of now: first the tenants named (those
// in force, in their order), listed even without requests; then, each in one row and
// only when there are some, the requests no tenant was named for (refused before
// admission, or ended before the tenants section was loaded) and the requests of
// tenants no longer named (a reload renamed or removed them). So there are at most
// len(names)+2 rows, however many names the window's requests carry. Each request is
// judged by its tier's SLO in tiers, def for a tier not in tiers.
func (w *Window) ByTenant(names []string, tiers []admission.TierStats, def measure.SLO) []TenantLive {
	slos := make(map[string]measure.SLO, len(tiers))
	for _, t := range tiers {
		slos[t.Name] = t.SLO
	}
	index := make(map[string]int, len(names))
	for i, n := range names {
		index[n] = i
	}
	none, former := len(names), len(names)+1
	tallies := make([]tally, len(names)+2)
	recent, covered := w.recent()
	for _, r := range recent {
		i, ok := index[r.tenant]
		switch {
		case ok:
		case r.tenant == "":
			i = none
		default:
			i = former
		}
		slo, ok := slos[r.tier]
		if !ok {
			slo = def
		}
		tallies[i].add(r, slo)
	}
	out := make([]TenantLive, 0, len(tallies))
	for i := range tallies {
		t := &tallies[i]
		if i >= none && t.Requests == 0 {
			continue
		}
		tl := TenantLive{Former: i == former, Live: t.live(covered)}
		tl.Goodput = tl.PerSecond(tl.Met)
		if i < none {
			tl.Tenant = names[i]
		}
		out = append(out, tl)
	}
	return out
}

// tally accumulates a Live and its latency samples.
type tally struct {
	Live
	ttft, tpot []time.Duration
}

// add counts r, judging it by slo.
func (t *tally) add(r record, slo measure.SLO) {
	t.Requests++
	switch r.outcome {
	case measure.UpstreamError, measure.UpstreamTimeout, measure.AbortedMidstream, measure.EngineError:
		t.Failed++
	case measure.Rejected:
		t.Rejected++
	case measure.ClientCancelled:
		t.Cancelled++
	}
	if !r.judged {
		return
	}
	t.Judged++
	t.ttft = append(t.ttft, r.ttft)
	if r.tpot > 0 {
		t.tpot = append(t.tpot, r.tpot)
	}
	if slo.Met(r.ttft, r.tpot) {
		t.Met++
	}
}

// live returns the summary with its percentiles and attainment, over covered.
func (t *tally) live(covered time.Duration) Live {
	l := t.Live
	l.Covered = covered
	l.P95TTFT, l.P95TPOT = p95(t.ttft), p95(t.tpot)
	l.Attainment = math.NaN()
	if l.Judged > 0 {
		l.Attainment = float64(l.Met) / float64(l.Judged)
	}
	return l
}

// recent returns the records that ended within the span, oldest first, and how long
// a time they cover: the span, or less when the window started later or had to forget
// requests of the span beyond its capacity (it covers them from the oldest it kept).
func (w *Window) recent() ([]record, time.Duration) {
	now := w.clock.Now()
	from := now.Add(-w.span)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.since.After(from) {
		from = w.since
	}
	var out []record
	if w.full {
		out = append(out, w.ring[w.next:]...)
		if oldest := w.ring[w.next].end; oldest.After(from) {
			from = oldest
		}
	}
	out = append(out, w.ring[:w.next]...)
	return slices.DeleteFunc(out, func(r record) bool { return r.end.Before(now.Add(-w.span)) }), now.Sub(from)
}

// p95 returns the nearest-rank 95th percentile of xs (which it sorts), 0 when empty.
func p95(xs []time.Duration) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	return xs[int(math.Ceil(0.95*float64(len(xs))))-1]
}
