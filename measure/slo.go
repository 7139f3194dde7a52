package measure

import (
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"
)

// Duration is a time.Duration written as Go writes durations — "2s", "100ms", "1m30s" —
// in YAML, in JSON (a string) and as text (flags, via flag.TextVar).
type Duration time.Duration

// String returns the duration as time.Duration writes it: "2s".
func (d Duration) String() string { return time.Duration(d).String() }

// UnmarshalYAML parses a Go duration string; the error names the line.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %q is not a duration such as 2s or 100ms", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// MarshalText writes the duration as "2s" (YAML and JSON use it too).
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText parses a Go duration string such as "2s".
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// SLO is the latency objective a request is judged by: a bound on its time to first
// token and one on its time per output token. A bound of 0 is none: it is not checked.
// Which TTFT the bound applies to — the client's, slogate's queue wait included, or the
// engine's, from dispatch — is in the name of each rule that takes a Result.
type SLO struct {
	TTFT Duration `yaml:"ttft,omitempty" json:"ttft,omitempty"`
	TPOT Duration `yaml:"tpot,omitempty" json:"tpot,omitempty"`
}

// NewSLO returns the SLO of bounds ttft and tpot (0: none).
func NewSLO(ttft, tpot time.Duration) SLO { return SLO{TTFT: Duration(ttft), TPOT: Duration(tpot)} }

// Or returns s with each bound of 0 replaced by def's.
func (s SLO) Or(def SLO) SLO {
	if s.TTFT == 0 {
		s.TTFT = def.TTFT
	}
	if s.TPOT == 0 {
		s.TPOT = def.TPOT
	}
	return s
}

// MetTTFT reports whether ttft meets the TTFT bound: it is at most the bound (exactly at
// the bound meets it), or there is no bound.
func (s SLO) MetTTFT(ttft time.Duration) bool { return s.TTFT <= 0 || ttft <= time.Duration(s.TTFT) }

// MetTPOT reports whether tpot meets the TPOT bound: it is at most the bound, or there
// is no bound. A tpot of 0 — fewer than two output tokens, no time per token — meets it.
func (s SLO) MetTPOT(tpot time.Duration) bool { return s.TPOT <= 0 || tpot <= time.Duration(s.TPOT) }

// Met reports whether ttft and tpot both meet s (see MetTTFT and MetTPOT). It is the rule
// for one request's latencies, and for percentiles of many: callers that judge what
// they measured themselves, or later than they measured it, pass the two durations
// (from ClientLatency or DispatchLatency when they come from a Result); callers with
// the Result at hand use MetByClient or MetFromDispatch.
func (s SLO) Met(ttft, tpot time.Duration) bool { return s.MetTTFT(ttft) && s.MetTPOT(tpot) }

// MetByClient reports whether r met s as its client saw it: r is judged at all (see
// ClientLatency), and its TTFT with slogate's queue wait included, and its TPOT, meet s.
func (s SLO) MetByClient(r Result) bool {
	ttft, tpot, ok := ClientLatency(r)
	return ok && s.Met(ttft, tpot)
}

// MetFromDispatch reports whether the engine's part of r met s: r is judged at all (see
// ClientLatency), and its TTFT counted from dispatch to the engine (slogate's queue wait
// left out), and its TPOT, meet s.
func (s SLO) MetFromDispatch(r Result) bool {
	ttft, tpot, ok := DispatchLatency(r)
	return ok && s.Met(ttft, tpot)
}

// ClientLatency returns what an SLO judges of r as its client saw it — the TTFT from
// arrival at slogate (r.QueueWait + r.TTFT) and the TPOT (0 with fewer than two output
// tokens) — and whether r is judged at all. Only a stream that ended OK with output
// (r.OutputChunks > 0) is: a non-streamed answer arrives at once, and a request that
// failed, was rejected or was given up on was not served, a matter of availability,
// not of latency. Both durations are 0 when r is not judged. The latency histograms,
// the SLO alerting rules built on them and the status page count this TTFT.
func ClientLatency(r Result) (ttft, tpot time.Duration, judged bool) {
	if !isJudged(r) {
		return 0, 0, false
	}
	return r.QueueWait + r.TTFT, r.TPOT, true
}

// DispatchLatency is ClientLatency with the TTFT counted from dispatch to the engine
// (r.TTFT): the engine's part, which admission's SLO feedback steers the in-flight caps
// by (slogate's queue is bounded separately, by its maximum wait).
func DispatchLatency(r Result) (ttft, tpot time.Duration, judged bool) {
	if !isJudged(r) {
		return 0, 0, false
	}
	return r.TTFT, r.TPOT, true
}

// isJudged reports whether an SLO applies to r (see ClientLatency).
func isJudged(r Result) bool { return r.Outcome == OK && r.Stream && r.OutputChunks > 0 }
