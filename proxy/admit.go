package proxy

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/wire"
)

// Admitter decides whether a request may go to the engine now, and who is asking (see
// admission.Controller).
type Admitter interface {
	Admit(ctx context.Context, r admission.Request) (*admission.Ticket, error)
	// Tenant names the tenant of a request with headers h; "" without tenants.
	Tenant(h http.Header) string
}

// admit asks admission control about the exchange. It answers the client itself and
// reports false when the request is turned away or its client leaves while it waits.
// The ticket it keeps counts the request in admission's ledger until report releases it.
func (p *Proxy) admit(w http.ResponseWriter, ex *exchange) bool {
	if p.cfg.Admission == nil {
		return true
	}
	if ex.class != admission.Probe { // slogate's own probes belong to no tenant
		ex.tenant = p.cfg.Admission.Tenant(ex.r.Header)
	}
	if ex.span != nil {
		ex.span.enterQueue(p.cfg.Clock.Now())
		defer func() { ex.span.leaveQueue(p.cfg.Clock.Now()) }()
	}
	tk, err := p.cfg.Admission.Admit(ex.ctx, admission.Request{
		Model: ex.req.Model, Prompt: ex.req.Prompt, Class: ex.class, Tenant: ex.tenant, Output: outputBound(ex.req),
		Stream: ex.req.Stream,
	})
	if err == nil {
		// The ticket's tenant is the one admission charged, which a reload between the
		// two calls may have changed.
		ex.ticket, ex.tenant = tk, tk.Tenant()
		writeQuota(w.Header(), tk.Quota())
		return true
	}
	var rej *admission.Rejection
	if errors.As(err, &rej) {
		ex.tier, ex.reject = rej.Tier, rej
		if rej.Tenant != "" {
			ex.tenant = rej.Tenant
		}
	}
	switch {
	case errors.Is(context.Cause(ex.ctx), ErrShutdown) && !ex.clientGone():
		wire.WriteError(w, http.StatusServiceUnavailable, wire.APIError{Message: shutdownMessage, Type: wire.TypeServer})
		ex.status, ex.failure = http.StatusServiceUnavailable, measure.Shutdown
	case rej != nil && rej.Reason == admission.ClientGone:
		ex.status, ex.failure = StatusClientClosed, measure.ClientCancelled
	case rej != nil:
		writeRejection(w, rej)
		ex.status, ex.failure = rej.Status(), measure.Rejected
	default:
		ex.status, ex.failure = StatusClientClosed, measure.ClientCancelled
	}
	return false
}

// outputBound returns the most output tokens req may produce: max_tokens (or
// max_completion_tokens) times its choices, 0 when it sets no bound. wire.Inspect
// bounds both to int32, so the product cannot overflow.
func outputBound(req wire.Request) int {
	if !req.HasMaxTokens || req.MaxTokens <= 0 {
		return 0
	}
	return req.MaxTokens * max(req.N, 1)
}

// writeQuota sets the headers OpenAI's API sends about rate limits from a tenant's
// budgets: x-ratelimit-limit-X, the budget per minute; x-ratelimit-remaining-X, what is
// left of it; x-ratelimit-reset-X, the time until it "resets to its initial state" (is
// full again), as a Go duration string — "1s", "6m0s", "12ms" — for X requests and
// tokens (OpenAI's rate-limits guide, "Rate limits in headers",
// platform.openai.com/docs/guides/rate-limits). The tokens trio carries the token budget
// that binds first (admission.Quota.Tokens). Budgets the tenant does not have get no
// headers.
//
// The numbers are whole, as OpenAI's are, and never promise more than admission
// grants: the limit and the remaining allowance are rounded down (a bucket holding 2.7
// admits a request of 2 tokens, not one of 3), the reset up to the millisecond, so that
// a client that waits that long finds the budget whole.
func writeQuota(h http.Header, q admission.Quota) {
	for _, b := range []struct {
		what string
		a    admission.Allowance
	}{{"requests", q.Requests}, {"tokens", q.Tokens()}} {
		if !b.a.Set() {
			continue
		}
		h.Set("X-Ratelimit-Limit-"+b.what, strconv.FormatFloat(math.Floor(b.a.Limit), 'f', 0, 64))
		h.Set("X-Ratelimit-Remaining-"+b.what, strconv.FormatFloat(math.Floor(max(b.a.Remaining, 0)), 'f', 0, 64))
		h.Set("X-Ratelimit-Reset-"+b.what, ceilTo(b.a.Reset, time.Millisecond).String())
	}
}

// ceilTo rounds d up to a whole multiple of unit, but for up to a microsecond above
// one: admission's durations come from float arithmetic on per-minute budgets, a
// nanosecond or so off the whole value they stand for, which must not cost a client a
// whole millisecond or second.
func ceilTo(d, unit time.Duration) time.Duration {
	return (max(d-time.Microsecond, 0) + unit - 1).Truncate(unit)
}

// writeRejection answers a request admission turned away: 429 (503 when the engine is
// down) with Retry-After in whole seconds and retry-after-ms (which the OpenAI SDKs
// prefer), both rounded up so that a client that waits that long is not turned away
// again for the same budget, the reason and tier in headers, the tenant's x-ratelimit-*
// headers, and the OpenAI error JSON whose code is the reason. A request that can never
// be admitted (admission.Rejection.Final) also gets x-should-retry: false, which the
// OpenAI SDKs honour before their own retry rules (openai-go:
// internal/requestconfig/requestconfig.go, shouldRetry), so a client does not wait out
// Retry-After to be turned away again.
func writeRejection(w http.ResponseWriter, rej *admission.Rejection) {
	h := w.Header()
	writeQuota(h, rej.Quota)
	if rej.Final {
		h.Set("X-Should-Retry", "false")
	}
	h.Set("Retry-After", strconv.FormatInt(max(int64(ceilTo(rej.RetryAfter, time.Second)/time.Second), 1), 10))
	h.Set("Retry-After-Ms", strconv.FormatInt(max(ceilTo(rej.RetryAfter, time.Millisecond).Milliseconds(), 1), 10))
	h.Set("X-Slogate-Reason", rej.Reason.String())
	h.Set("X-Slogate-Tier", rej.Tier)
	typ := wire.TypeRateLimit
	if rej.Status() == http.StatusServiceUnavailable {
		typ = wire.TypeServer
	}
	wire.WriteError(w, rej.Status(), wire.APIError{Message: rej.Message, Type: typ, Code: rej.Reason.String()})
}
