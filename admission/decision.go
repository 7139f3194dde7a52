package admission

import (
	"fmt"
	"net/http"
	"time"
)

// Class is a request's priority. Its String form is a bounded metric label value.
type Class uint8

// The classes, highest first. Lower classes are admitted only from headroom and are
// shed first.
const (
	Interactive Class = iota // the default: a person is waiting
	Batch                    // throughput work that can wait
	Probe                    // slogate's own synthetic probes
	numClasses
)

// PriorityHeader is the request header that chooses a class.
const PriorityHeader = "X-Slogate-Priority"

var classNames = [numClasses]string{"interactive", "batch", "probe"}

// String returns "interactive", "batch" or "probe".
func (c Class) String() string {
	if c < numClasses {
		return classNames[c]
	}
	return "unknown"
}

// ParseClass maps a PriorityHeader value to a class: "", "interactive", "batch" or
// "probe"; anything else is Interactive, so a header can never create a new label value.
func ParseClass(v string) Class {
	for i, n := range classNames {
		if v == n {
			return Class(i)
		}
	}
	return Interactive
}

// Verdict is what admission did with a request.
type Verdict uint8

// The verdicts.
const (
	Admitted Verdict = iota // dispatched at once
	Queued                  // dispatched after waiting in the tier's queue
	Rejected                // turned away
	numVerdicts
)

var verdictNames = [numVerdicts]string{"admitted", "queued", "rejected"}

// String returns "admitted", "queued" or "rejected".
func (v Verdict) String() string {
	if v < numVerdicts {
		return verdictNames[v]
	}
	return "unknown"
}

// Reason says why a request was rejected or had to wait. Its String form is a bounded
// metric label value and the value of the reason header on rejections.
type Reason uint8

// The reasons.
const (
	NoReason           Reason = iota // admitted at once
	TierRate                         // the tier's token bucket is empty
	QueueFull                        // the tier's queue is full
	QueueTimeout                     // waited max_queue_wait without a slot
	PredictedLate                    // the predicted wait already exceeds max_queue_wait
	Saturated                        // the engine is saturated (queue, KV cache)
	EngineDown                       // the engine is down, or its metrics are stale and the policy is closed
	InFlightCap                      // waited for a slot under the tier's in-flight cap
	ClientGone                       // the client left while the request waited
	Shed                             // pushed out of the queue by a request of a higher class, or of a tenant below its share
	TenantRequests                   // the tenant's requests per minute are spent
	TenantInputTokens                // the tenant's input tokens per minute are spent
	TenantOutputTokens               // the tenant's output tokens per minute are spent
	TenantConcurrency                // the tenant has its most requests open
	EngineBudget                     // the engine budget the tiers share is spent (Config.SharedRate)
	PrefillBacklog                   // the tier's prompts still in prefill fill its max_prefill_tokens
	numReasons
)

var reasonNames = [numReasons]string{
	"", "tier-rate", "queue-full", "queue-timeout", "predicted-late", "saturated", "engine-down", "in-flight-cap", "client-gone", "shed",
	"tenant-requests", "tenant-input-tokens", "tenant-output-tokens", "tenant-concurrency", "engine-budget",
	"prefill-backlog",
}

// String returns the reason's name, e.g. "queue-full"; "none" for NoReason.
func (r Reason) String() string {
	switch {
	case r == NoReason:
		return "none"
	case r < numReasons:
		return reasonNames[r]
	}
	return "unknown"
}

// Reasons lists every reason, for pre-creating metric series.
func Reasons() []Reason {
	out := make([]Reason, numReasons)
	for i := range out {
		out[i] = Reason(i)
	}
	return out
}

// Decision is one admission decision, as observers see it.
type Decision struct {
	Tier    string
	Tenant  string // "" without a tenants section
	Class   Class
	Verdict Verdict
	Reason  Reason        // why it was rejected, or why it waited
	Wait    time.Duration // time spent in the queue
	Shadow  bool          // shadow mode: recorded, not enforced
}

// Rejection is the error Admit returns for a request turned away: what to answer. For a
// client that went away while it waited (Reason ClientGone) there is nobody to answer;
// it unwraps to the context's error.
type Rejection struct {
	Reason Reason
	Tier   string
	Tenant string // "" without a tenants section
	Quota  Quota  // the tenant's budgets, for the x-ratelimit-* headers
	// Final says the same request can never be admitted: it needs more than a whole
	// minute of one of its tenant's budgets. Retrying it is pointless.
	Final      bool
	RetryAfter time.Duration
	Message    string
	cause      error
}

// Unwrap returns the context error behind a ClientGone rejection, else nil.
func (r *Rejection) Unwrap() error { return r.cause }

// Error returns the message for the client.
func (r *Rejection) Error() string { return r.Message }

// Status is the HTTP status to answer with: 503 when the engine is down, else 429.
func (r *Rejection) Status() int {
	if r.Reason == EngineDown {
		return http.StatusServiceUnavailable
	}
	return http.StatusTooManyRequests
}

func reject(t *tierState, reason Reason, retry time.Duration, format string, args ...any) *Rejection {
	return &Rejection{
		Reason: reason, Tier: t.cfg.Name, RetryAfter: max(retry, 0),
		Message: fmt.Sprintf("slogate: tier %s: ", t.cfg.Name) + fmt.Sprintf(format, args...),
	}
}
