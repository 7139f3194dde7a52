package exporter

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/clock"
	"github.com/slogate/slogate/engine"
)

// InFlightSource reports the inference requests in flight and the KV tokens they hold.
// admission.Controller satisfies it with its ledger. InFlight must be safe for
// concurrent use; it is called once per scrape.
type InFlightSource interface {
	InFlight() (requests int, kvTokens int64)
}

// EngineSource returns the engine's latest Snapshot. *engine.Scraper satisfies it.
// Latest must be safe for concurrent use; it is called once per scrape.
type EngineSource interface {
	Latest() engine.Snapshot
}

// ModelWatcher is told of the model names requests carry that are not among the served
// ones, so that it can read the served models again soon: a LoRA adapter loaded into
// vLLM at run time is then recorded under its own name after its first requests
// instead of "other" until the next periodic read. *engine.Scraper satisfies it.
// UnknownModel is called on the request path: it must return at once, without I/O,
// and be safe for concurrent use.
type ModelWatcher interface {
	UnknownModel(name string)
}

// AdmissionSource reports admission control's state. *admission.Controller satisfies
// it. Stats must be safe for concurrent use; it is called once per scrape (and by New,
// to learn the tiers and tenants whose series to create up front, and the tiers' SLOs).
type AdmissionSource interface {
	Stats() admission.Stats
}

// ReloadSource reports the outcome of the last reload of the tiers file.
// *admission.Reloader satisfies it. Status must be safe for concurrent use; it is called
// once per scrape and once by New.
type ReloadSource interface {
	Status() admission.ReloadStatus
}

// ProbeSource reports the synthetic prober's latest results. Probe must be safe for
// concurrent use; it is called once per scrape.
type ProbeSource interface {
	Probe() ProbeSnapshot
}

// ProbeSnapshot is what the exporter publishes of the prober: its schedule and the cells
// and gate checks of its latest report. The prober's own types stay in package synth;
// cmd translates them.
type ProbeSnapshot struct {
	Workload  string
	Running   bool
	Runs      int       // probes run to the end
	Held      int       // probes not started or stopped because live traffic needed the engine
	LastStart time.Time // zero before the first
	LastEnd   time.Time
	LastOK    bool // the last probe completed
	Cells     []ProbeCell
	Gate      []ProbeCheck
	// Compared are the headline figures of the cells the latest probe shares with the run
	// before it, each with whether it regressed; nil when there is no run to compare with
	// (no probe history, or the first run of the workload).
	Compared []ProbeComparison
}

// ProbeCell is one cell of the latest probe report. Load names its column: the
// concurrency ("4") or, for a scan, the multiple of the reference rate ("1.1x").
type ProbeCell struct {
	Row, Load   string
	State       string
	Throughput  float64 // output tokens/s
	TTFTp50     float64 // seconds
	TTFTp95     float64
	TPOTp95     float64
	SuccessRate float64
}

// ProbeCheck is one functional-gate check of the latest probe.
type ProbeCheck struct{ Name, Verdict string }

// ProbeComparison is one headline figure of one cell of the latest probe, compared with
// the run before it: Figure is the figure's name in the report's JSON (output_tok_per_s,
// ttft_p95_s, tpot_p95_s).
type ProbeComparison struct {
	Row, Load, Figure string
	Regressed         bool
}

// SustainableSource reports each tier's calibrated sustainable rate λ* in force, in
// requests per second, by tier name; tiers without one are absent. Sustainable must be
// safe for concurrent use; it is called once per scrape.
type SustainableSource interface {
	Sustainable() map[string]float64
}

// CalibrationSource reports the sidecar's calibrations. Calibration must be safe for
// concurrent use; it is called once per scrape.
type CalibrationSource interface {
	Calibration() CalibrationSnapshot
}

// CalibrationSnapshot is what the exporter publishes of calibration: its schedule and
// the latest complete calibration. cmd translates package calibrate's types into it.
type CalibrationSnapshot struct {
	Running   bool
	Runs      int       // calibrations run to the end
	Held      int       // calibrations not started or stopped because live traffic needed the engine
	LastStart time.Time // zero before the first
	LastOK    bool      // the last calibration completed
	Finished  time.Time // when the latest complete calibration finished; zero: none
	Applied   bool      // its limits are in force
	Tiers     []CalibrationTier
}

// CalibrationTier is one tier of the latest complete calibration: its knee, the knee's
// ratio to the calibration before (0: unknown), and the limits derived from it.
type CalibrationTier struct {
	Name         string
	Knee         float64 // requests/s
	KneeChange   float64
	Rate         float64 // requests/s
	Burst        int
	MaxInFlight  int
	MaxQueue     int
	MaxQueueWait time.Duration
}

// Options configure Metrics. The zero value is usable: default buckets, no SLO
// boundaries, every model labelled "other", no in-flight, engine or admission gauges.
//
// A source field (InFlight, Engine, Admission, Reloads) holding a nil pointer, map,
// slice, func or channel wrapped in the interface counts as absent, like a nil
// interface: New never calls a method on it.
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

	// UnknownModels, if set, is told of every model name (not empty) a request carries
	// that ServedModels does not list, when the request starts and when it is recorded.
	// It lets the source of ServedModels notice adapters loaded at run time; a request
	// is still recorded under "other" if the new names are not in by the time it ends.
	UnknownModels ModelWatcher

	// NativeHistograms adds native (sparse) buckets with a growth factor of 1.1 to every
	// histogram, alongside the classic buckets. Scrapers that negotiate the protobuf
	// format with native histograms enabled get both; others get the classic buckets.
	NativeHistograms bool

	// Version and Revision label slogate_build_info; empty means "unknown".
	Version, Revision string

	// InFlight, if set, is read at scrape time for slogate_inflight_requests and
	// slogate_inflight_kv_tokens.
	InFlight InFlightSource

	// Engine, if set, is read at scrape time for the slogate_engine_* gauges.
	Engine EngineSource

	// Admission, if set, is read at scrape time for the slogate_admission_* gauges
	// (mode, engine state, and per tier: requests in flight and their caps, queues,
	// rates, SLOs, observed p95s, service rates, input-length bounds) and the
	// slogate_tenant_* gauges (weights, budgets, open and queued requests, fair-share
	// counters). Its tiers and tenants at the time New is called get their per-request
	// series created up front, at zero; the tenants' requests are judged by their tier's
	// SLO as its Stats last reported it.
	Admission AdmissionSource

	// Reloads, if set, is read at scrape time for
	// slogate_admission_config_last_reload_successful and
	// slogate_admission_config_last_reload_success_timestamp_seconds.
	Reloads ReloadSource

	// Probe reports the synthetic prober's latest results for the slogate_probe_*
	// gauges; nil when no prober is scheduled.
	Probe ProbeSource

	// Calibration reports the sidecar's calibrations for the slogate_calibration_*
	// gauges; nil when the sidecar does not calibrate.
	Calibration CalibrationSource

	// Sustainable, if set with Admission, reports each tier's calibrated sustainable
	// rate for slogate_admission_sustainable_rate and slogate_admission_demand_ratio.
	Sustainable SustainableSource

	// Clock is used for the engine scrape age; default clock.Real.
	Clock clock.Clock
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

// DefaultQueueWaitBuckets are the boundaries of slogate_queue_wait_seconds, in seconds:
// from 1 ms to a minute, including the built-in tiers' maximum waits (2, 4, 10 and 30 s).
var DefaultQueueWaitBuckets = []float64{
	0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 2.5, 4, 5, 10, 15, 30, 60,
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

// absent reports whether v, an interface value, holds nothing usable: nil, or a nil
// pointer, map, slice, func, channel or interface, which would make a method call
// panic or misbehave although v != nil.
func absent(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface, reflect.UnsafePointer:
		return rv.IsNil()
	}
	return false
}
