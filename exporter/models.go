package exporter

import (
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/wire"
)

// modelIndex maps the model name of a request to the series of its model label. Only
// served names get their own series; every other name shares OtherModel's, so the label
// stays bounded whatever clients send. The served names are re-read on every lookup and
// the table is rebuilt when they change; lookups of an unchanged set take no lock and
// allocate nothing. A name not served is reported to unknown, if set.
type modelIndex struct {
	m       *Metrics
	served  func() []string
	unknown ModelWatcher // nil: none
	table   atomic.Pointer[modelTable]

	mu  sync.Mutex              // serialises rebuilds; guards all
	all map[string]*modelSeries // every series ever made, by label value
}

// modelTable is one immutable generation of the index.
type modelTable struct {
	served []string // a copy of the served names it was built from
	byName map[string]*modelSeries
	single *modelSeries // the only served model, for requests without a model; else nil
	other  *modelSeries
}

func (x *modelIndex) init(m *Metrics, served func() []string, unknown ModelWatcher) {
	x.m, x.served, x.all = m, served, make(map[string]*modelSeries)
	if !absent(unknown) {
		x.unknown = unknown
	}
	var names []string
	if served != nil {
		names = served()
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.table.Store(x.build(names))
}

// lookup returns the series for a request's model. An empty name is the engine's only
// model when it serves exactly one (as vLLM resolves it), else OtherModel. A name not
// served is OtherModel and is reported to x.unknown.
func (x *modelIndex) lookup(model string) *modelSeries {
	t := x.table.Load()
	if x.served != nil {
		if names := x.served(); !slices.Equal(names, t.served) {
			t = x.rebuild(names)
		}
	}
	if model == "" {
		if t.single != nil {
			return t.single
		}
		return t.other
	}
	if s, ok := t.byName[model]; ok {
		return s
	}
	if x.unknown != nil {
		x.unknown.UnknownModel(model)
	}
	return t.other
}

// rebuild replaces the table with one for names, unless another goroutine already did.
func (x *modelIndex) rebuild(names []string) *modelTable {
	x.mu.Lock()
	defer x.mu.Unlock()
	if t := x.table.Load(); slices.Equal(names, t.served) {
		return t
	}
	t := x.build(names)
	x.table.Store(t)
	return t
}

// build makes a table for names; x.mu must be held.
func (x *modelIndex) build(names []string) *modelTable {
	t := &modelTable{
		served: slices.Clone(names),
		byName: make(map[string]*modelSeries, len(names)),
		other:  x.series(OtherModel),
	}
	for _, n := range names {
		if n != "" {
			t.byName[n] = x.series(n)
		}
	}
	if len(t.byName) == 1 {
		for _, s := range t.byName {
			t.single = s
		}
	}
	return t
}

// series returns the series of label value name, creating it once; x.mu must be held.
func (x *modelIndex) series(name string) *modelSeries {
	if s, ok := x.all[name]; ok {
		return s
	}
	s := newModelSeries(x.m, name)
	x.all[name] = s
	return s
}

// modelSeries holds one model label value's resolved children, so that observing a
// request costs no label hashing. Creating it creates the model's gap and token series,
// and its latency series for the tiers known up front (Metrics.precreate), at zero;
// latency series of other tiers are created on first use, and request counters too, as
// status codes are only known then.
type modelSeries struct {
	m    *Metrics
	name string

	gap        prometheus.Observer
	observeGap func(time.Duration)
	prompt     prometheus.Counter
	generated  [measure.TokensChunks + 1]prometheus.Counter // by TokenSource; TokensNone unused

	tiers [numTierSlots]atomic.Pointer[tierSeries] // by tierEntry.slot; nil until first use

	mu       sync.RWMutex // guards requests; serialises the creation of tiers
	requests map[requestKey]prometheus.Counter
}

// tierSeries holds the latency children of one (model, tier) pair.
type tierSeries struct {
	ttft, tpot, e2e prometheus.Observer
}

// requestKey identifies one slogate_requests_total series of a model: route, outcome,
// tier slot and status code packed into one integer, which maps hash faster than a
// struct with padding.
type requestKey uint64

func newRequestKey(route wire.Route, outcome measure.Outcome, tier uint8, code int16) requestKey {
	return requestKey(route)<<40 | requestKey(outcome)<<32 | requestKey(tier)<<16 | requestKey(uint16(code))
}

func newModelSeries(m *Metrics, name string) *modelSeries {
	s := &modelSeries{
		m: m, name: name,
		gap:      m.gap.WithLabelValues(name),
		prompt:   m.prompt.WithLabelValues(name),
		requests: make(map[requestKey]prometheus.Counter),
	}
	s.observeGap = func(d time.Duration) { s.gap.Observe(seconds(d)) }
	for _, src := range []measure.TokenSource{measure.TokensUsage, measure.TokensChunks} {
		s.generated[src] = m.generated.WithLabelValues(name, src.String())
	}
	for _, e := range m.precreate {
		s.tier(e)
	}
	return s
}

// tier returns the latency children of the model and tier e, creating them once.
func (s *modelSeries) tier(e *tierEntry) *tierSeries {
	if ts := s.tiers[e.slot].Load(); ts != nil {
		return ts
	}
	return s.newTier(e)
}

// newTier creates the latency children of tier e, unless another goroutine just did.
func (s *modelSeries) newTier(e *tierEntry) *tierSeries {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ts := s.tiers[e.slot].Load(); ts != nil {
		return ts
	}
	ts := &tierSeries{
		ttft: s.m.ttft.WithLabelValues(s.name, e.name),
		tpot: s.m.tpot.WithLabelValues(s.name, e.name),
		e2e:  s.m.e2e.WithLabelValues(s.name, e.name),
	}
	s.tiers[e.slot].Store(ts)
	return ts
}

// request returns the request counter for res's route, status and outcome in tier e.
func (s *modelSeries) request(res *measure.Result, e *tierEntry) prometheus.Counter {
	var code int16 // 0 for a status outside 100-599
	if res.Status >= 100 && res.Status <= 599 {
		code = int16(res.Status)
	}
	k := newRequestKey(res.Route, res.Outcome, e.slot, code)
	s.mu.RLock()
	c, ok := s.requests[k]
	s.mu.RUnlock()
	if ok {
		return c
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.requests[k]; ok {
		return c
	}
	c = s.m.requests.WithLabelValues(s.name, res.Route.String(), codeLabel(code), res.Outcome.String(), e.name)
	s.requests[k] = c
	return c
}

// codeLabel returns the code label value of a status: the number, or "unknown".
func codeLabel(code int16) string {
	if code == 0 {
		return "unknown"
	}
	return strconv.Itoa(int(code))
}

// generatedBy returns the output token counter for a token source.
func (s *modelSeries) generatedBy(src measure.TokenSource) prometheus.Counter {
	if int(src) < len(s.generated) && s.generated[src] != nil {
		return s.generated[src]
	}
	return s.m.generated.WithLabelValues(s.name, src.String()) // a source added to measure later
}
