package proxy

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/wire"
)

// errorHandler answers a request the engine did not answer: 504 when it timed out, 502
// when it could not be reached or its response could not be read, 503 when Shutdown cut
// it short, 408 when its client did not send its body in time; nothing when the client
// has gone (recorded as 499).
func (p *Proxy) errorHandler(w http.ResponseWriter, r *http.Request, err error) {
	if p.bodyTimedOut(w, r) {
		return
	}
	ex, _ := r.Context().Value(exchangeKey{}).(*exchange)
	status, outcome, msg := http.StatusBadGateway, measure.UpstreamError, "the engine is unreachable"
	switch {
	case ex != nil && !ex.clientGone() && errors.Is(context.Cause(r.Context()), ErrShutdown):
		status, outcome, msg = http.StatusServiceUnavailable, measure.Shutdown, shutdownMessage
	case r.Context().Err() != nil:
		status, outcome = StatusClientClosed, measure.ClientCancelled
	case isTimeout(err):
		status, outcome, msg = http.StatusGatewayTimeout, measure.UpstreamTimeout, "the engine did not answer in time"
	}
	if ex != nil {
		ex.status, ex.failure = status, outcome
	}
	if status == StatusClientClosed {
		return
	}
	if outcome == measure.Shutdown {
		wire.WriteError(w, status, wire.APIError{Message: msg, Type: wire.TypeServer})
		return
	}
	p.cfg.Logger.Warn("upstream request failed", "path", r.URL.Path, "status", status, "err", err)
	wire.WriteError(w, status, wire.APIError{Message: msg + ": " + err.Error()})
}

// shutdownMessage is what a client cut short by Shutdown is told.
const shutdownMessage = "slogate is shutting down and cut this request short; retry it"

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// close ends an exchange once the ReverseProxy is done with it, however it ended (it runs
// deferred, so also when the copy to the client aborted), and reports it.
func (p *Proxy) close(ex *exchange) {
	ex.idle.stop()
	p.report(ex)
}

// report classifies how the exchange ended, finishes its measurement and hands the
// result to the access log and then the observers. It runs once per inference request.
func (p *Proxy) report(ex *exchange) {
	if ex.rec == nil { // never dispatched
		ex.rec = measure.NewRecorder(ex.req.Route, ex.req.Stream, measure.Options{Clock: p.cfg.Clock})
	}
	status, outcome := ex.outcome()
	res := ex.rec.Finish(status, outcome)
	res.Tier, res.Tenant = ex.tier, ex.tenant
	if ex.ticket != nil {
		res.Tier, res.QueueWait = ex.ticket.Tier(), ex.ticket.Wait()
		ex.ticket.Done(res)
	}
	if ex.live != nil {
		p.live.leave(ex.live)
	}
	if sc, kept := ex.span.end(ex, &res, p.cfg.Judge, p.cfg.Clock.Now()); kept {
		res.TraceID = sc.TraceID().String()
	}
	// The access-log line is written before the observers see the result, so whoever
	// waits on an observer finds the line already there.
	p.accessLog(ex, res)
	if ex.class != admission.Probe {
		for _, o := range p.cfg.Observers {
			o.Observe(ex.req, res)
		}
	}
}

// outcome decides the status and outcome of an exchange from what was seen of it.
func (ex *exchange) outcome() (int, measure.Outcome) {
	// A stream whose end marker came through is complete, even when the client closed
	// it before the engine's end of body (the OpenAI SDKs close on [DONE]).
	cut := !ex.complete && !ex.done
	switch {
	case ex.failure != measure.OK:
		return ex.status, ex.failure
	case cut && ex.readErr == nil:
		// The copy stopped while the engine was still sending: the client went away.
		return StatusClientClosed, measure.ClientCancelled
	case cut && ex.clientGone():
		return StatusClientClosed, measure.ClientCancelled
	case cut && ex.rec.Outputs() > 0:
		return ex.status, measure.AbortedMidstream
	case cut:
		return ex.status, measure.UpstreamError
	case ex.status == http.StatusServiceUnavailable && ex.rec.Refused():
		// The engine's own admission caps turned it away (vLLM's 503s): load shed, not a
		// failure.
		return ex.status, measure.Rejected
	case ex.status >= 500:
		return ex.status, measure.UpstreamError
	case ex.status == http.StatusTooManyRequests:
		return ex.status, measure.Rejected
	case ex.status >= 400:
		return ex.status, measure.BadRequest
	}
	return ex.status, measure.OK
}

// accessLog writes one line per inference request with what was measured. It never logs
// the prompt, the output or any header.
func (p *Proxy) accessLog(ex *exchange, res measure.Result) {
	if !p.cfg.Logger.Enabled(context.Background(), slog.LevelInfo) {
		return
	}
	p.cfg.Logger.LogAttrs(context.Background(), slog.LevelInfo, "request",
		slog.String("route", res.Route.String()),
		slog.String("model", ex.req.Model),
		slog.Bool("stream", res.Stream),
		slog.Int("status", res.Status),
		slog.String("outcome", res.Outcome.String()),
		slog.Float64("ttft_ms", ms(res.TTFT)),
		slog.Float64("tpot_ms", ms(res.TPOT)),
		slog.Float64("e2e_ms", ms(res.E2E)),
		slog.Int("input_tokens", res.InputTokens),
		slog.Int("output_tokens", res.OutputTokens),
		slog.String("tokens_from", res.Tokens.String()),
		slog.String("finish_reason", res.FinishReason),
		slog.String("tier", res.Tier),
		slog.String("class", ex.servedClass().String()),
		slog.String("tenant", res.Tenant),
		slog.Float64("queue_ms", ms(res.QueueWait)),
		slog.String("remote", ex.r.RemoteAddr),
		slog.String("request_id", ex.r.Header.Get("X-Request-Id")),
		slog.String("trace_id", res.TraceID),
	)
}

// servedClass is the class the request was served at: its tenant's ceiling may have
// lowered the one it asked for.
func (ex *exchange) servedClass() admission.Class {
	if ex.ticket != nil {
		return ex.ticket.Class()
	}
	return ex.class
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
