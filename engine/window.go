package engine

import "time"

// ratioWindow is how far back the ratios of a Snapshot look: prefix-cache hits over
// queries, speculative acceptance, the engine's mean queue time.
const ratioWindow = time.Minute

// cumulative are the fields that are counters: they only grow while the engine runs.
var cumulative = []field{
	fPrefixHits, fPrefixQueries, fPreemptions, fSpecDrafts, fSpecDrafted, fSpecAccepted,
	fQueueSum, fQueueCount,
}

// stamped is a reading and the time it was taken (the scraper's clock).
type stamped struct {
	at time.Time
	rd reading
}

// window keeps the readings of the last ratioWindow, on the scraper's clock, so that
// ratios cover a recent minute rather than the engine's whole life or one scrape
// interval. Not safe for concurrent use (the Scraper holds its lock).
type window struct {
	ring []stamped // oldest first
}

// add records rd taken at now and returns the base of its ratios: the newest reading at
// least ratioWindow old, else the oldest one kept; nil when there is none (the first
// reading, or the first since the engine changed or a counter went back, i.e. the engine
// restarted).
func (w *window) add(now time.Time, rd reading) *reading {
	if n := len(w.ring); n > 0 && (w.ring[n-1].rd.kind != rd.kind || wentBack(w.ring[n-1].rd, rd)) {
		w.ring = w.ring[:0]
	}
	// Drop readings older than the newest one that is already ratioWindow old.
	cut := now.Add(-ratioWindow)
	for len(w.ring) > 1 && !w.ring[1].at.After(cut) {
		w.ring = w.ring[1:]
	}
	var base *reading
	if len(w.ring) > 0 {
		b := w.ring[0].rd
		base = &b
	}
	w.ring = append(w.ring, stamped{now, rd})
	return base
}

// wentBack reports whether a counter of next is below its value in prev.
func wentBack(prev, next reading) bool {
	for _, f := range cumulative {
		if next.v[f] < prev.v[f] { // NaN compares false
			return true
		}
	}
	return false
}
