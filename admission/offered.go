package admission

import "time"

// offeredWindow is how far back a tier's offered load is averaged (TierStats.Offered).
const offeredWindow = time.Minute

// offeredSeconds is the number of one-second buckets in offeredWindow.
const offeredSeconds = int(offeredWindow / time.Second)

// rateWindow counts a tier's arrivals in one-second buckets of the controller's clock
// over the last offeredWindow: constant memory and constant work per arrival, whatever
// the rate. Not safe for concurrent use; the controller's lock guards it.
type rateWindow struct {
	counts [offeredSeconds]int
	newest int64 // the Unix second of the newest bucket
	seen   bool  // an arrival was counted
}

// add counts one arrival at now.
func (w *rateWindow) add(now time.Time) {
	if !w.seen {
		w.seen, w.newest = true, now.Unix()
	}
	w.advance(now)
	w.counts[second(w.newest)]++
}

// second returns the index of second sec's bucket.
func second(sec int64) int {
	i := int(sec % int64(offeredSeconds))
	if i < 0 {
		i += offeredSeconds
	}
	return i
}

// advance moves the window to now's second, emptying the buckets it passes over. A
// clock that steps back leaves the window where it is.
func (w *rateWindow) advance(now time.Time) {
	sec := now.Unix()
	if sec-w.newest >= int64(offeredSeconds) {
		w.counts, w.newest = [offeredSeconds]int{}, sec
		return
	}
	for ; w.newest < sec; w.newest++ {
		w.counts[second(w.newest+1)] = 0
	}
}

// rate returns the arrivals per second over the offeredWindow up to now: the newest
// second's bucket included (so a burst shows at once), the window's oldest second
// dropped as now passes it.
func (w *rateWindow) rate(now time.Time) float64 {
	if !w.seen {
		return 0
	}
	w.advance(now)
	n := 0
	for _, c := range w.counts {
		n += c
	}
	return float64(n) / offeredWindow.Seconds()
}
