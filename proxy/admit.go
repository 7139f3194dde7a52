package proxy

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/wire"
)

// Admitter decides whether a request may go to the engine now (see admission.Controller).
type Admitter interface {
	Admit(ctx context.Context, r admission.Request) (*admission.Ticket, error)
}

// admit asks admission control about the exchange. It answers the client itself and
// reports false when the request is turned away or its client leaves while it waits.
// The ticket it keeps counts the request in admission's ledger until report releases it.
func (p *Proxy) admit(w http.ResponseWriter, ex *exchange) bool {
	if p.cfg.Admission == nil {
		return true
	}
	tk, err := p.cfg.Admission.Admit(ex.ctx, admission.Request{Model: ex.req.Model, Prompt: ex.req.Prompt, Class: ex.class})
	if err == nil {
		ex.ticket = tk
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

// writeRejection answers a request admission turned away: 429 (503 when the engine is
// down) with Retry-After in seconds and retry-after-ms (which OpenAI clients honour),
// the reason and tier in headers, and the OpenAI error JSON.
func writeRejection(w http.ResponseWriter, rej *admission.Rejection) {
	h := w.Header()
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
