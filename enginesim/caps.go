package enginesim

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/slogate/slogate/wire"
)

// The engines' own admission caps, off unless set (Config.MaxNumQueuedReqs,
// MaxNumQueuedTokens, MaxQueuedRequests). They refuse a request from the scheduler's
// state at the moment it arrives, without queueing it, and no metric of either engine
// counts the refusal (docs/simulator.md, "The engines' admission caps").
//
// vLLM, --max-num-queued-reqs and --max-num-queued-tokens (vllm/config/scheduler.py;
// vllm/v1/engine/async_llm.py, AsyncLLM.check_admission): checked in the API server when
// the request arrives (GenerateBaseServing._preflight, before the prompt is rendered and
// tokenized, vllm/entrypoints/generate/base/serving.py) and again as it is handed to the
// engine (AsyncLLM._add_request, with no await between the check and the request's
// registration). They count the requests the API server has not finished, waiting or
// running (OutputProcessor.get_num_unfinished_requests), and the prompt tokens of those
// that have produced no token yet, each prompt whole (get_num_queued_tokens sums
// prompt_len while is_prefilling: chunked-prefill progress and prefix-cache hits are not
// subtracted). A request is refused when the unfinished requests plus its n exceed the
// first cap, or when the backlog has already reached the second; its own prompt is not
// added. Either answers 503 with the OpenAI error body, also for a streaming request
// (vllm/exceptions.py, QueueOverflowError and MaxQueuedTokensError, GracefulHTTPError;
// vllm/entrypoints/serve/utils/error_response.py: the type is the status phrase).
//
// SGLang, --max-queued-requests (python/sglang/srt/managers/scheduler.py,
// Scheduler._abort_on_queued_limit): checked in the scheduler as the request joins the
// waiting queue, after tokenization, against that queue alone: refused when the waiting
// requests plus this one exceed the cap. The scheduler aborts it with status 503 and "The
// request queue is full."; a request that is not streamed gets a 503
// (tokenizer_manager.py, _handle_abort_finish_reason raises HTTPException), a streamed
// one a 200 stream whose first event is the error (serving_chat.py and
// serving_completions.py, the abort branch of the stream generators).

// capHit is which cap refused a request.
type capHit uint8

const (
	capNone         capHit = iota
	capQueuedReqs          // vLLM --max-num-queued-reqs: QueueOverflowError
	capQueuedTokens        // vLLM --max-num-queued-tokens: MaxQueuedTokensError
	capQueueFull           // SGLang --max-queued-requests
)

// The engines' messages, verbatim (vllm/exceptions.py; SGLang's scheduler.py).
const (
	vllmQueueOverflowMessage = "The engine is currently busy and cannot accept new requests. Please try again later or on a different instance."
	vllmQueuedTokensMessage  = "The engine has reached its prefill token backlog limit. Please try again later or on a different instance."
	sglangQueueFullMessage   = "The request queue is full."
)

// vllmUnavailableType is the error type vLLM gives a GracefulHTTPError: the phrase of
// its status, HTTPStatus(503).phrase.
const vllmUnavailableType = "Service Unavailable"

// errCaps reports caps that do not fit the configuration.
var errCaps = errors.New("enginesim: admission caps")

// checkCaps reports a negative cap or a cap of the other engine's flavour.
func (c Config) checkCaps() error {
	for _, v := range []struct {
		name   string
		n      int
		flavor Flavor
	}{
		{"MaxNumQueuedReqs (--max-num-queued-reqs)", c.MaxNumQueuedReqs, FlavorVLLM},
		{"MaxNumQueuedTokens (--max-num-queued-tokens)", c.MaxNumQueuedTokens, FlavorVLLM},
		{"MaxQueuedRequests (--max-queued-requests)", c.MaxQueuedRequests, FlavorSGLang},
	} {
		switch {
		case v.n < 0:
			return fmt.Errorf("%w: %s is %d; want 0 (off) or more", errCaps, v.name, v.n)
		case v.n > 0 && c.Flavor != v.flavor:
			return fmt.Errorf("%w: %s is a %s cap; this engine is %s", errCaps, v.name, v.flavor, c.Flavor)
		}
	}
	return nil
}

// overCap returns the cap that refuses a request arriving now; s.mu is held.
func (s *Server) overCap() capHit { return s.cfg.overCap(s.sched) }

// overCap returns the cap of c that refuses a request arriving now at the scheduler s.
func (c *Config) overCap(s *Scheduler) capHit {
	switch {
	case c.MaxNumQueuedReqs > 0 && s.inFlight()+1 > c.MaxNumQueuedReqs: // n = 1
		return capQueuedReqs
	case c.MaxNumQueuedTokens > 0 && s.backlog >= c.MaxNumQueuedTokens:
		return capQueuedTokens
	case c.MaxQueuedRequests > 0 && s.waitingLive+1 > c.MaxQueuedRequests:
		return capQueueFull
	}
	return capNone
}

// preflight is vLLM's first check, when the request arrives in the API server; SGLang
// checks in its scheduler only (submit).
func (s *Server) preflight() capHit {
	if s.cfg.Flavor != FlavorVLLM {
		return capNone
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.overCap()
}

// refuse answers a request a cap refused, as its engine does.
func (s *Server) refuse(w http.ResponseWriter, j *job, hit capHit) {
	s.cfg.Logger.Debug("request refused by the engine's admission cap", "cap", hit.flag(), "route", j.req.Route.String())
	switch {
	case hit == capQueuedReqs:
		wire.WriteError(w, http.StatusServiceUnavailable, wire.APIError{Message: vllmQueueOverflowMessage, Type: vllmUnavailableType})
	case hit == capQueuedTokens:
		wire.WriteError(w, http.StatusServiceUnavailable, wire.APIError{Message: vllmQueuedTokensMessage, Type: vllmUnavailableType})
	case j.req.Stream:
		s.refuseStream(w, j)
	case j.req.Route == wire.RouteGenerate:
		// /generate lets the HTTPException reach FastAPI's handler: {"detail": ...}.
		writeBody(w, http.StatusServiceUnavailable, `{"detail":"`+sglangQueueFullMessage+`"}`)
	default:
		// serving_base.py, handle_request: except HTTPException -> create_error_response
		// (e.detail, err_type=str(e.status_code)), the flat ErrorResponse as orjson writes it.
		writeBody(w, http.StatusServiceUnavailable, `{"object":"error","message":"`+sglangQueueFullMessage+`","type":"503","param":null,"code":503}`)
	}
}

// flag returns the engine flag of the cap.
func (h capHit) flag() string {
	switch h {
	case capQueuedReqs:
		return "max-num-queued-reqs"
	case capQueuedTokens:
		return "max-num-queued-tokens"
	case capQueueFull:
		return "max-queued-requests"
	}
	return ""
}

// sglangQueueFullEvent is the data of the error event SGLang streams for a request its
// queue refused: create_streaming_error_response(message, code.name, code.value) of
// serving_base.py, json.dumps({"error": ErrorResponse(...).model_dump()}).
const sglangQueueFullEvent = `{"error": {"object": "error", "message": "` + sglangQueueFullMessage + `", "type": "SERVICE_UNAVAILABLE", "param": null, "code": 503}}`

// refuseStream answers a streamed request SGLang's queue refused: a 200 stream with
// the error event (completions and chat; with include_usage a usage chunk of zeros
// follows, from the abort's empty meta_info), or on /generate the abort as the one event
// (tokenizer_manager.py, _handle_abort_req), then [DONE].
func (s *Server) refuseStream(w http.ResponseWriter, j *job) {
	a := &answer{j: j, chat: j.req.Route == wire.RouteChatCompletions}
	if j.req.Route == wire.RouteGenerate {
		a.buf = append(a.buf, `data: {"text":"","output_ids":[],"meta_info":{"id":"`...)
		a.buf = append(a.buf, j.hexID()...)
		a.buf = append(a.buf, `","finish_reason":{"type":"abort","status_code":503,"message":"`+sglangQueueFullMessage+`"},"weight_version":"default","e2e_latency":`...)
		a.buf = strconv.AppendFloat(a.buf, time.Since(j.arrival).Seconds(), 'f', 6, 64)
		a.buf = append(a.buf, ",\"completion_tokens\":0}}\n\n"...)
	} else {
		a.buf = append(a.buf, "data: "+sglangQueueFullEvent+"\n\n"...)
		if j.req.IncludeUsage {
			c := a.envelope()
			c.Usage = &wire.Usage{}
			a.event(c)
		}
	}
	a.buf = append(a.buf, "data: [DONE]\n\n"...)
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(a.buf)
}

// writeBody writes a JSON body the engine has already encoded.
func writeBody(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}
