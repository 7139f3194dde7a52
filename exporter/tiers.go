package exporter

import (
	"maps"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Tier label values that are not tier names.
const (
	// NoTier is the tier label value of requests admission did not classify: admission
	// is off, or the request never reached it (refused as invalid or too large before,
	// or its client left while it waited).
	NoTier = "none"
	// OtherTier is the tier label value of every tier name past the first
	// MaxTierLabels seen (admission allows 16 tiers at a time, but reloads can rename
	// them).
	OtherTier = "other"
	// MaxTierLabels is how many distinct tier names become tier label values.
	MaxTierLabels = 32
)

// numTierSlots is the number of tier label values: NoTier, OtherTier and the named ones.
const numTierSlots = MaxTierLabels + 2

// tierEntry is one tier label value.
type tierEntry struct {
	name string
	slot uint8 // index into modelSeries.tiers: 0 NoTier, 1 OtherTier, then by first sight
	// queueWait is the tier's slogate_queue_wait_seconds child; nil for NoTier, which
	// never waits in a queue.
	queueWait prometheus.Observer
}

// tierIndex maps a tier name to its label value. Lookups of a known name take no lock
// and allocate nothing; the first MaxTierLabels names get their own label value, and
// any later one shares OtherTier's. A tier literally named "none" or "other" gets an
// entry of its own whose series are those of NoTier or OtherTier: the counts merge.
type tierIndex struct {
	queueWait *prometheus.HistogramVec
	table     atomic.Pointer[map[string]*tierEntry] // immutable; replaced on growth
	none      *tierEntry

	mu    sync.Mutex // serialises growth; guards other and named
	other *tierEntry // created on the first overflow; never in table
	named int        // entries in table
}

func (x *tierIndex) init(queueWait *prometheus.HistogramVec) {
	x.queueWait = queueWait
	x.none = &tierEntry{name: NoTier, slot: 0}
	x.table.Store(&map[string]*tierEntry{})
}

// lookup returns the entry of a tier name; "" is NoTier.
func (x *tierIndex) lookup(name string) *tierEntry {
	if name == "" {
		return x.none
	}
	if e, ok := (*x.table.Load())[name]; ok {
		return e
	}
	return x.add(name)
}

// add returns the entry of a name not in the table, adding it if there is room, else
// OtherTier's. Names past the limit are not remembered, so each of their lookups takes
// the lock: admission's tiers are few, and only a stream of renames gets here.
func (x *tierIndex) add(name string) *tierEntry {
	x.mu.Lock()
	defer x.mu.Unlock()
	old := *x.table.Load()
	if e, ok := old[name]; ok {
		return e
	}
	if x.named >= MaxTierLabels {
		if x.other == nil {
			x.other = &tierEntry{name: OtherTier, slot: 1, queueWait: x.queueWait.WithLabelValues(OtherTier)}
		}
		return x.other
	}
	x.named++
	e := &tierEntry{name: name, slot: uint8(1 + x.named), queueWait: x.queueWait.WithLabelValues(name)}
	next := maps.Clone(old)
	next[name] = e
	x.table.Store(&next)
	return e
}
