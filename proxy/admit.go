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
	ex.tenant = p.cfg.Admission.Tenant(ex.r.Header)
	tk, err := p.cfg.Admission.Admit(ex.ctx, admission.Request{
		Model: ex.req.Model, Prompt: ex.req.Prompt, Class: ex.class, Tenant: ex.tenant, Output: outputBound(ex.req),
	})
	if err == nil {
		ex.ticket = tk
		writeQuota(w.Header(), tk.Quota())
		return true
	}
	var rej *admission.Rejection
	if errors.As(err, &rej) {
		ex.tier = rej.Tier
	}
	switch {
	case errors.Is(context.Cause(ex.ctx), ErrShutdown) && ex.r.Context().Err() == nil:
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
// max_completion_tokens) times its choices, 0 when it sets no bound.
func outputBound(req wire.Request) int {
	if !req.HasMaxTokens || req.MaxTokens <= 0 {
		return 0
	}
	return req.MaxTokens * max(req.N, 1)
}

// writeQuota sets the headers OpenAI clients read for rate limits
// (x-ratelimit-{limit,remaining,reset}-{requests,tokens}) from a tenant's budgets; for
// the tokens trio, the token budget that binds first (admission.Quota.Tokens). Budgets
// the tenant does not have get no headers.
func writeQuota(h http.Header, q admission.Quota) {
	for _, b := range []struct {
		what string
		a    admission.Allowance
	}{{"requests", q.Requests}, {"tokens", q.Tokens()}} {
		if !b.a.Set() {
			continue
		}
		h.Set("X-Ratelimit-Limit-"+b.what, strconv.FormatInt(int64(b.a.Limit), 10))
		h.Set("X-Ratelimit-Remaining-"+b.what, strconv.FormatInt(int64(b.a.Remaining), 10))
		h.Set("X-Ratelimit-Reset-"+b.what, b.a.Reset.Round(time.Millisecond).String())
	}
}

// writeRejection answers a request admission turned away: 429 (503 when the engine is
// down) with Retry-After in seconds and retry-after-ms (which OpenAI clients honour),
// the reason and tier in headers, and the OpenAI error JSON.
func writeRejection(w http.ResponseWriter, rej *admission.Rejection) {
	h := w.Header()
	writeQuota(h, rej.Quota)
	h.Set("Retry-After", strconv.Itoa(max(int(math.Ceil(rej.RetryAfter.Seconds())), 1)))
	h.Set("Retry-After-Ms", strconv.FormatInt(max(rej.RetryAfter.Milliseconds(), 1), 10))
	h.Set("X-Slogate-Reason", rej.Reason.String())
	h.Set("X-Slogate-Tier", rej.Tier)
	typ := wire.TypeRateLimit
	if rej.Status() == http.StatusServiceUnavailable {
		typ = wire.TypeServer
	}
	wire.WriteError(w, rej.Status(), wire.APIError{Message: rej.Message, Type: typ, Code: rej.Reason.String()})
}
