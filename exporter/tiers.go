package exporter

import (
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
	// MaxTierLabels is how many distinct tier names, besides OtherTier, become tier
	// label values.
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
	// judged and met are its slogate_slo_judged_requests_total and
	// slogate_slo_met_requests_total children.
	judged, met prometheus.Counter
}

// tierIndex maps a tier name to its label value. Lookups of a known name take no lock
// and allocate nothing; OtherTier and the first MaxTierLabels other names get their own
// label value, and any later one shares OtherTier's (labelIndex). A tier literally named
// "other" is OtherTier; one named "none" gets an entry of its own whose series are those
// of NoTier: the counts merge.
type tierIndex struct {
	labelIndex[*tierEntry] // "" is NoTier
}

func (x *tierIndex) init(queueWait *prometheus.HistogramVec, judged, met *prometheus.CounterVec) {
	none := &tierEntry{name: NoTier, slot: 0, judged: judged.WithLabelValues(NoTier), met: met.WithLabelValues(NoTier)}
	x.labelIndex.init(MaxTierLabels, OtherTier, none, func(label string, n int) *tierEntry {
		return &tierEntry{name: label, slot: uint8(1 + n), queueWait: queueWait.WithLabelValues(label),
			judged: judged.WithLabelValues(label), met: met.WithLabelValues(label)}
	})
}
