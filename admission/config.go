// Package admission decides, for every inference request, whether the engine can serve it
// inside its SLO now, later (after a short, bounded wait), or not at all.
//
// Requests fall into tiers by estimated input length. Each tier has a token bucket for its
// arrival rate, a cap on requests in flight to the engine (adjusted online from the TTFT
// and TPOT observed against the tier's SLO), and a bounded FIFO queue with a maximum wait.
// New requests are also held while the engine is saturated. What cannot be served in time
// is rejected at once, with the reason and when to retry.
package admission

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/slogate/slogate/measure"
)

// ErrInvalidConfig wraps every problem found in a tiers file.
var ErrInvalidConfig = errors.New("admission: invalid tiers configuration")

// Config is the content of a tiers file. Decoding is strict: unknown fields are errors.
type Config struct {
	Tiers    []TierConfig `yaml:"tiers"`
	Feedback Feedback     `yaml:"feedback,omitempty"`
	// SharedRate makes the tiers' rates one engine budget: a request of a tier at rate r
	// costs 1/r of an engine second, and the tiers together take at most one engine
	// second per second (shared.go), each still within its own rate — or up to 2 while
	// the demand, over the last minute and the last ten, asks for no more than that (a
	// moderate overload is served whole); a request the budget cannot pay for is
	// rejected with EngineBudget. A reload starts it full, and lending ten minutes later.
	// slogate calibrate sets it: its rates are each tier's alone on the engine.
	SharedRate bool `yaml:"shared_rate,omitempty"`
	// Tenants, when set, gives requests a tenant each: fair share inside the tiers and
	// per-tenant budgets (tenants.go).
	Tenants *Tenants `yaml:"tenants,omitempty"`
	// Calibration records where the limits came from (slogate calibrate writes it); it
	// is kept as it is and never interpreted here.
	Calibration yaml.Node `yaml:"calibration,omitempty"`
}

// TierConfig is one input-length tier.
type TierConfig struct {
	Name           string `yaml:"name"`
	MaxInputTokens int    `yaml:"max_input_tokens,omitempty"` // 0 on the last tier: no upper bound
	// Rate and Burst are the token bucket of admitted arrivals; Rate 0 disables it.
	Rate  float64 `yaml:"rate,omitempty"`
	Burst int     `yaml:"burst,omitempty"`
	// MaxRate, when above Rate, lets the SLO feedback move the bucket's rate between
	// Rate and MaxRate: up while the tier turns arrivals away for their rate and meets
	// its SLOs, down when it misses them. 0: the rate stays at Rate.
	MaxRate float64 `yaml:"max_rate,omitempty"`
	// MaxInFlight caps the tier's requests in flight to the engine; the SLO feedback
	// moves the working cap between MinInFlight (default 1) and it.
	MaxInFlight int `yaml:"max_in_flight"`
	MinInFlight int `yaml:"min_in_flight,omitempty"`
	// MaxQueue requests may wait, each at most MaxQueueWait; a zero wait defaults to
	// half the tier's TTFT SLO, so that a request that waited the longest can still
	// meet it (the client feels the wait as part of its TTFT).
	MaxQueue     int              `yaml:"max_queue"`
	MaxQueueWait measure.Duration `yaml:"max_queue_wait,omitempty"`
	// MaxPrefillTokens bounds the estimated prompt tokens of the tier's requests in
	// flight that have had no output yet: a request that would take them past it is
	// turned away at once (PrefillBacklog), since waiting in slogate's queue would not
	// take it past the prefill ahead of it any sooner; one with none ahead of it never
	// is. The engine prefills at about a fixed rate of tokens a second, so the bound
	// keeps a clump of the tier's prompts inside its TTFT SLO whatever the clump's size
	// in requests: slogate calibrate sets it to 0.9 × the TTFT SLO × the prefill rate it
	// measured. Only the tier's own prompts count (the delay a long prompt of another
	// tier causes depends on the engine's chunking). A request that does not stream
	// shows no output before its end: it counts until an estimate of its prefill's end
	// (tierState.startPrefill). 0: no bound.
	MaxPrefillTokens int `yaml:"max_prefill_tokens,omitempty"`
	// SLO is the tier's objective; zero fields take the sidecar's SLOs. The feedback
	// holds the engine's part to it (TTFT from dispatch: measure.DispatchLatency); the
	// status page and the alerting rules judge the client's (queue wait included).
	SLO measure.SLO `yaml:"slo,omitempty"`
}

// Feedback parameters of the in-flight cap controller (see controller.go). Zero values
// take the defaults.
type Feedback struct {
	Interval   measure.Duration `yaml:"interval,omitempty"`    // how often the cap is reconsidered; default 2s
	Window     measure.Duration `yaml:"window,omitempty"`      // observations older than this are forgotten; default 60s
	MinSamples int              `yaml:"min_samples,omitempty"` // fewer observations than this change nothing; default 10
	Backoff    float64          `yaml:"backoff,omitempty"`     // cap multiplier when an SLO is missed, in (0,1); default 0.9
	Increase   float64          `yaml:"increase,omitempty"`    // cap increment when SLOs are met and requests wait; default 1
	Target     float64          `yaml:"target,omitempty"`      // the share of each SLO the p95s aim at, in (0,1]; default 0.9
}

// LoadConfig reads and validates a tiers file.
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return ParseConfig(data)
}

// ParseConfig decodes a tiers file strictly (unknown fields are errors) and validates it.
func ParseConfig(data []byte) (Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return Config{}, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("%w: a tiers file holds one YAML document", ErrInvalidConfig)
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// maxTiers bounds the tiers of a file, and with them the tier label's values.
const maxTiers = 16

// Validate reports the first inconsistent setting.
func (c Config) Validate() error {
	if len(c.Tiers) == 0 || len(c.Tiers) > maxTiers {
		return fmt.Errorf("%w: want 1 to %d tiers, got %d", ErrInvalidConfig, maxTiers, len(c.Tiers))
	}
	names := map[string]bool{}
	prev := 0
	for i, t := range c.Tiers {
		last := i == len(c.Tiers)-1
		bad := func(msg string) error { return fmt.Errorf("%w: tier %d (%q): %s", ErrInvalidConfig, i, t.Name, msg) }
		switch {
		case t.Name == "" || len(t.Name) > 32:
			return bad("needs a name of 1-32 characters")
		case names[t.Name]:
			return bad("duplicate name")
		case !last && t.MaxInputTokens <= prev:
			return bad("max_input_tokens must grow from tier to tier (only the last may omit it)")
		case last && t.MaxInputTokens != 0 && t.MaxInputTokens <= prev:
			return bad("max_input_tokens must be above the previous tier's")
		case !(t.Rate >= 0) || math.IsInf(t.Rate, 0) || t.Burst < 0 || t.Rate > 0 && t.Burst < 1:
			return bad("rate must be >= 0 with burst >= 1 when the rate is set")
		case !(t.MaxRate >= 0) || math.IsInf(t.MaxRate, 0) || t.MaxRate > 0 && t.MaxRate < t.Rate || t.MaxRate > 0 && t.Rate == 0:
			return bad("max_rate must be 0, or at least rate (which must then be set)")
		case t.MaxInFlight < 1 || t.MinInFlight < 0 || t.MinInFlight > t.MaxInFlight:
			return bad("needs 1 <= min_in_flight <= max_in_flight (min defaults to 1)")
		case t.MaxQueue < 0 || t.MaxQueueWait < 0:
			return bad("max_queue and max_queue_wait must not be negative")
		case t.MaxPrefillTokens < 0:
			return bad("max_prefill_tokens must not be negative")
		case t.SLO.TTFT < 0 || t.SLO.TPOT < 0:
			return bad("SLOs must not be negative")
		}
		names[t.Name] = true
		prev = t.MaxInputTokens
	}
	if c.Tenants != nil {
		if err := c.Tenants.validate(); err != nil {
			return err
		}
	}
	f := c.Feedback
	// Written so that NaN fails too (.nan decodes from YAML, and would poison the cap).
	if f.Interval < 0 || f.Window < 0 || f.MinSamples < 0 || !(f.Increase >= 0) || math.IsInf(f.Increase, 0) ||
		!(f.Backoff >= 0 && f.Backoff < 1) || !(f.Target >= 0 && f.Target <= 1) {
		return fmt.Errorf("%w: feedback: interval, window and min_samples >= 0, increase finite and >= 0, backoff in (0,1), target in (0,1]", ErrInvalidConfig)
	}
	return nil
}

// withDefaults returns c with zero values replaced: the sidecar's SLOs on tiers that set
// none, min_in_flight 1, and the feedback defaults.
func (c Config) withDefaults(slo measure.SLO) Config {
	tiers := make([]TierConfig, len(c.Tiers))
	copy(tiers, c.Tiers)
	for i := range tiers {
		t := &tiers[i]
		t.SLO = t.SLO.Or(slo)
		t.MinInFlight = max(t.MinInFlight, 1)
		if t.MaxQueueWait == 0 {
			t.MaxQueueWait = t.SLO.TTFT / 2
		}
	}
	c.Tiers = tiers
	f := &c.Feedback
	f.Interval = orDefault(f.Interval, measure.Duration(2*time.Second))
	f.Window = orDefault(f.Window, measure.Duration(60*time.Second))
	f.MinSamples = orDefault(f.MinSamples, 10)
	f.Target = orDefault(f.Target, 0.9)
	f.Backoff = orDefault(f.Backoff, 0.9)
	f.Increase = orDefault(f.Increase, 1)
	return c
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// DefaultConfig is the configuration used when no tiers file is given: tiers of at most
// 2K, 8K and 32K input tokens and one above, no rate limit, in-flight caps and queues
// that shrink as prompts grow (so that long prompts cannot crowd out short ones), the
// sidecar's SLOs, and queue waits of half the TTFT SLO. `slogate calibrate` measures
// better numbers for a given engine.
func DefaultConfig() Config {
	tier := func(name string, maxIn, inFlight, queue int) TierConfig {
		return TierConfig{Name: name, MaxInputTokens: maxIn, MaxInFlight: inFlight, MaxQueue: queue}
	}
	return Config{Tiers: []TierConfig{
		tier("short", 2048, 64, 128),
		tier("medium", 8192, 32, 64),
		tier("long", 32768, 4, 8),
		tier("xlong", 0, 2, 4),
	}}
}
