package admission

import "time"

// offeredWindow is how far back a tier's offered load is averaged (TierStats.Offered),
// in offeredSeconds buckets of a second.
const (
	offeredWindow  = time.Minute
	offeredSeconds = int(offeredWindow / time.Second)
)

// sustainedWindow is how far back the shared budget also averages the demand before it
// lends (shared.go), in sustainedBuckets buckets of a minute: long enough that the quiet
// spells of bursty arrivals do not read as a light load.
const (
	sustainedWindow  = 10 * time.Minute
	sustainedBuckets = int(sustainedWindow / time.Minute)
)

// rateWindow counts a tier's arrivals in buckets of the controller's clock over the last
// len(counts) buckets: constant memory and constant work per arrival, whatever the rate.
// Its zero value counts nothing; newRateWindow makes one. Not safe for concurrent use;
// the controller's lock guards it.
type rateWindow struct {
	counts []int
	width  int64 // seconds a bucket
	newest int64 // the number of the newest bucket: Unix seconds / width
	seen   bool  // an arrival was counted
}

// newRateWindow returns a window of n buckets of width (whole seconds, at least one).
func newRateWindow(width time.Duration, n int) rateWindow {
	return rateWindow{counts: make([]int, n), width: max(int64(width/time.Second), 1)}
}

// add counts one arrival at now.
func (w *rateWindow) add(now time.Time) {
	if len(w.counts) == 0 {
		return
	}
	if !w.seen {
		w.seen, w.newest = true, w.bucket(now)
	}
	w.advance(now)
	w.counts[w.index(w.newest)]++
}

// bucket returns the number of now's bucket.
func (w *rateWindow) bucket(now time.Time) int64 {
	b := now.Unix() / w.width
	if now.Unix()%w.width < 0 {
		b--
	}
	return b
}

// index returns the slot of bucket b.
func (w *rateWindow) index(b int64) int {
	n := int64(len(w.counts))
	i := int(b % n)
	if i < 0 {
		i += int(n)
	}
	return i
}

// advance moves the window to now's bucket, emptying the buckets it passes over. A
// clock that steps back leaves the window where it is.
func (w *rateWindow) advance(now time.Time) {
	b := w.bucket(now)
	if b-w.newest >= int64(len(w.counts)) {
		clear(w.counts)
		w.newest = b
		return
	}
	for ; w.newest < b; w.newest++ {
		w.counts[w.index(w.newest+1)] = 0
	}
}

// rate returns the arrivals per second over the window up to now: the newest bucket
// included (so a burst shows at once), the window's oldest bucket dropped as now passes
// it.
func (w *rateWindow) rate(now time.Time) float64 {
	if !w.seen {
		return 0
	}
	w.advance(now)
	n := 0
	for _, c := range w.counts {
		n += c
	}
	return float64(n) / (float64(len(w.counts)) * float64(w.width))
}
