// Package measure defines how slogate measures the service of one LLM request, so that
// the proxy (server side) and the prober (client side) mean the same thing by TTFT.
//
// A Recorder is fed the response as it passes — each server-sent event of a stream, or a
// whole non-streaming body — and yields a Result: time to first token, the gaps between
// output chunks, time per output token, end-to-end time, tokens and an Outcome. The
// definitions are those of the benchmark tools (see Result).
//
// An SLO is what a Result is judged by, with one rule wherever slogate judges: which
// requests count, by which TTFT (the client's, ClientLatency, or the engine's,
// DispatchLatency), and what is within a bound (SLO.Met).
package measure

import (
	"time"

	"github.com/slogate/slogate/wire"
)

// Outcome is how a request ended. Its String form is a bounded metric label value.
type Outcome uint8

// The outcomes, in the order of precedence a caller should apply when several hold.
const (
	OK               Outcome = iota // the engine answered in full
	ClientCancelled                 // the client went away before the answer ended (recorded as 499)
	UpstreamError                   // the engine was unreachable or answered 5xx
	UpstreamTimeout                 // the engine did not answer in time
	AbortedMidstream                // the stream broke off after it began, without its end marker
	EngineError                     // the engine answered, then reported a failure in the answer itself (an error event in the stream)
	BadRequest                      // the request was refused as invalid (4xx other than 429)
	Rejected                        // admission control turned the request away: slogate's (429/503), or the engine's own caps (its 429, or a refusal: Result.Refused)
	Shutdown                        // slogate cut the request short because it was shutting down
	numOutcomes
)

var outcomeNames = [numOutcomes]string{
	"ok", "client_cancelled", "upstream_error", "upstream_timeout", "aborted_midstream", "engine_error", "bad_request",
	"rejected",
	"shutdown",
}

// String returns the outcome's label value, e.g. "client_cancelled".
func (o Outcome) String() string {
	if o < numOutcomes {
		return outcomeNames[o]
	}
	return "unknown"
}

// Outcomes lists every outcome, for pre-creating metric series.
func Outcomes() []Outcome {
	out := make([]Outcome, numOutcomes)
	for i := range out {
		out[i] = Outcome(i)
	}
	return out
}

// TokenSource says where a Result's output token count comes from.
type TokenSource uint8

// The token sources. Usage is exact; Chunks counts output-bearing chunks, which equals
// tokens except where one chunk carries several (speculative decoding, a slow reader).
const (
	TokensNone   TokenSource = iota // no output, or nothing to count it by
	TokensUsage                     // the engine's usage report
	TokensChunks                    // counted from stream chunks (no usage in the stream)
)

// String returns "none", "usage" or "chunks".
func (s TokenSource) String() string {
	switch s {
	case TokensUsage:
		return "usage"
	case TokensChunks:
		return "chunks"
	}
	return "none"
}

// Result is the measurement of one request. Durations that do not apply are zero: TTFT
// when no output arrived, TPOT when fewer than two output tokens did, and both for
// non-streaming requests, whose answer arrives at once.
//
//   - TTFT: from dispatch to the first chunk with non-empty output (text, content,
//     reasoning or a tool call); role-only and usage-only chunks do not count.
//   - E2E: from dispatch to the end of the response (or the moment it broke off).
//   - TPOT: (E2E − TTFT) / (output tokens − 1).
//   - Gaps: the times between successive output chunks after the first.
type Result struct {
	Route   wire.Route
	Stream  bool
	Status  int // HTTP status the client got; 499 when it went away first
	Outcome Outcome

	Start time.Time // dispatch to the engine
	TTFT  time.Duration
	E2E   time.Duration
	TPOT  time.Duration

	OutputChunks int           // chunks that carried output
	MaxGap       time.Duration // the longest gap between output chunks
	Gaps         []time.Duration

	InputTokens  int // from usage; 0 when the engine reported none
	CachedTokens int // prompt tokens served from the engine's prefix cache, when reported
	OutputTokens int
	Tokens       TokenSource

	Ended      bool // the response ended properly: [DONE] for a stream, a complete body otherwise
	ErrorEvent bool // the engine sent an error object in place of a chunk (vLLM and SGLang then still send [DONE])
	// Refused: the engine turned the request away at its own admission caps before any
	// output (wire.APIError.Refusal): a 503 body, or SGLang's error event opening a
	// stream. The request counts as rejected, not failed.
	Refused      bool
	FinishReason string // the engine's finish_reason, "" if none arrived

	// Set by the proxy from admission control: the request's tier ("" when admission is
	// off) and the time it waited in the tier's queue before dispatch, which the client
	// felt on top of TTFT and E2E.
	Tier      string
	QueueWait time.Duration
	// Tenant is the request's tenant ("" without a tenants section): one of a bounded
	// set of names (admission.Controller.Tenant), fit for a metric label.
	Tenant string
	// TraceID is the id of the request's trace, 32 hex digits, when its spans are
	// exported (sampled by the head rule or kept by the tail rule); "" otherwise. Set by
	// the proxy; the exporter puts it on the latency histograms as an exemplar.
	TraceID string
}
