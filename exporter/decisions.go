package exporter

import (
	"maps"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slogate/slogate/admission"
)

var _ admission.DecisionObserver = (*Metrics)(nil)

// ObserveDecision counts one admission decision in slogate_admission_decisions_total,
// under its tier (as Observe labels it: NoTier for "", OtherTier past MaxTierLabels
// names), class, verdict and reason, and, when d.Tenant is set and d is no probe's, in
// slogate_tenant_admission_decisions_total. Shadow decisions count like enforced ones. It is
// called by admission for every decision, without admission's lock held; it is safe for
// concurrent use, never blocks on I/O, and once a label set's series exists it takes no
// lock and allocates nothing.
func (m *Metrics) ObserveDecision(d admission.Decision) {
	e := m.tiers.lookup(d.Tier)
	m.decided.counter(e, d.Class, d.Verdict, d.Reason).Inc()
	m.observeTenantDecision(&d)
}

// decisionIndex caches the children of slogate_admission_decisions_total by a packed
// key, so counting a decision costs one map lookup. The table is immutable and replaced
// when a label set is first seen; the label sets are bounded (tier slots × classes ×
// verdicts × reasons, each enum's unknown values folded into one).
type decisionIndex struct {
	vec   *prometheus.CounterVec
	table atomic.Pointer[map[uint32]prometheus.Counter]
	mu    sync.Mutex // serialises growth
}

func (x *decisionIndex) init(vec *prometheus.CounterVec) {
	x.vec = vec
	x.table.Store(&map[uint32]prometheus.Counter{})
}

// unknownEnum is the key byte of every enum value whose String is "unknown".
const unknownEnum = 0xff

// counter returns the counter of one label set, creating it once.
func (x *decisionIndex) counter(e *tierEntry, c admission.Class, v admission.Verdict, r admission.Reason) prometheus.Counter {
	cs, vs, rs := c.String(), v.String(), r.String()
	key := uint32(e.slot)<<24 | uint32(enumByte(uint8(c), cs))<<16 | uint32(enumByte(uint8(v), vs))<<8 | uint32(enumByte(uint8(r), rs))
	if ctr, ok := (*x.table.Load())[key]; ok {
		return ctr
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	old := *x.table.Load()
	if ctr, ok := old[key]; ok {
		return ctr
	}
	ctr := x.vec.WithLabelValues(e.name, cs, vs, rs)
	next := maps.Clone(old)
	next[key] = ctr
	x.table.Store(&next)
	return ctr
}

// enumByte returns an enum's key byte: its value, or unknownEnum for every value its
// String calls "unknown" (so they share one key as they share one label value).
func enumByte(v uint8, name string) uint8 {
	if name == "unknown" {
		return unknownEnum
	}
	return v
}
