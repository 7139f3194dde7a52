package exporter

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/slogate/slogate/engine"
)

// Clock tells the time; tests pass a fake one. measure.WallClock and any type with a
// Now method satisfy it.
type Clock interface{ Now() time.Time }

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

// InFlightSource reports the inference requests in flight and the KV tokens they hold.
// The proxy satisfies it. InFlight must be safe for concurrent use; it is called once
// per scrape.
type InFlightSource interface {
	InFlight() (requests int, kvTokens int64)
}

// EngineSource returns the engine's latest Snapshot. *engine.Scraper satisfies it.
// Latest must be safe for concurrent use; it is called once per scrape.
type EngineSource interface {
	Latest() engine.Snapshot
}

// Options configure Metrics. The zero value is usable: default buckets, no SLO
// boundaries, every model labelled "other", no in-flight or engine gauges.
type Options struct {
	// TTFT and TPOT are the SLO thresholds. A positive threshold is added as a bucket
	// boundary, exactly, to the time-to-first-token histogram (TTFT) and to the
	// time-per-output-token and inter-token-gap histograms (TPOT). Zero means none.
	TTFT, TPOT time.Duration

	// TTFTBuckets, TPOTBuckets and E2EBuckets replace the default classic bucket
	// boundaries, in seconds (any order; duplicates are merged). TPOTBuckets also serve
	// the inter-token gap histogram. Nil means DefaultTTFTBuckets, DefaultTPOTBuckets and
	// DefaultE2EBuckets.
	TTFTBuckets, TPOTBuckets, E2EBuckets []float64

	// ServedModels returns the model names the engine serves (e.g. from
	// engine.Snapshot.Models). Only these become model label values; any other name
	// becomes "other". It is called on every Observe, so it must be cheap and safe for
	// concurrent use, and must not modify a slice it has returned. Nil: every model is
	// "other".
	ServedModels func() []string

	// NativeHistograms adds native (sparse) buckets with a growth factor of 1.1 to every
	// histogram, alongside the classic buckets. Scrapers that negotiate the protobuf
	// format with native histograms enabled get both; others get the classic buckets.
	NativeHistograms bool

	// Version and Revision label slogate_build_info; empty means "unknown".
	Version, Revision string

	// InFlight, if non-nil, is read at scrape time for slogate_inflight_requests and
	// slogate_inflight_kv_tokens. A nil pointer wrapped in the interface is not nil.
	InFlight InFlightSource

	// Engine, if non-nil, is read at scrape time for the slogate_engine_* gauges.
	Engine EngineSource

	// Clock is used for the engine scrape age; default the wall clock.
	Clock Clock
}

// DefaultTTFTBuckets are vLLM's time-to-first-token buckets, in seconds, so slogate's
// and the engine's histograms can be compared bucket by bucket.
var DefaultTTFTBuckets = []float64{
	0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
	1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560,
}

// DefaultTPOTBuckets are the time-per-output-token and inter-token-gap buckets, in
// seconds: vLLM's, with finer steps below 50 ms, where current GPUs decode.
var DefaultTPOTBuckets = []float64{
	0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075,
	0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80,
}

// DefaultE2EBuckets are the end-to-end request duration buckets, in seconds: vLLM's,
// with three more below 0.3 s for short non-streaming requests.
var DefaultE2EBuckets = []float64{
	0.05, 0.1, 0.2, 0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60,
	120, 240, 480, 960, 1920, 7680,
}

// ErrInvalidOptions reports Options that New cannot use.
var ErrInvalidOptions = errors.New("exporter: invalid options")

// Validate reports options New would refuse, with an error wrapping ErrInvalidOptions:
// a negative SLO threshold, or a bucket boundary that is NaN or infinite.
func (o Options) Validate() error {
	if o.TTFT < 0 || o.TPOT < 0 {
		return fmt.Errorf("%w: negative SLO threshold (TTFT %v, TPOT %v)", ErrInvalidOptions, o.TTFT, o.TPOT)
	}
	for _, bs := range [][]float64{o.TTFTBuckets, o.TPOTBuckets, o.E2EBuckets} {
		for _, b := range bs {
			if math.IsNaN(b) || math.IsInf(b, 0) {
				return fmt.Errorf("%w: bucket boundary %v is not finite", ErrInvalidOptions, b)
			}
		}
	}
	return nil
}

// seconds converts d to seconds with one correctly rounded division, so that a
// threshold such as 1.7s becomes exactly the float64 nearest to 1.7 — the value that
// prints as le="1.7". Observations use it too, so an observation equal to a threshold
// falls into the threshold's bucket.
func seconds(d time.Duration) float64 { return float64(d) / float64(time.Second) }

// buckets returns base (or def when base is nil) with the positive thresholds added,
// sorted and without duplicates.
func buckets(base, def []float64, thresholds ...time.Duration) []float64 {
	if base == nil {
		base = def
	}
	out := slices.Clone(base)
	for _, t := range thresholds {
		if t > 0 {
			out = append(out, seconds(t))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
