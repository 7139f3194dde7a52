package enginesim

import (
	"net/http"

	"github.com/slogate/slogate/wire"
)

// The stream of each route, dispatched on the job's route: OpenAI chunks for
// completions and chat (stream.go, encode.go), typed events for vLLM's Responses API
// (responses.go), SGLang's native events for /generate (native.go).

// open renders the events that precede the first token, once: the chat role chunk,
// or response.created and its companions.
func (a *answer) open() {
	if a.opened {
		return
	}
	a.opened = true
	switch {
	case a.chat:
		a.role()
	case a.j.req.Route == wire.RouteResponses:
		a.responsesOpen()
	}
}

// step renders the next k tokens; last marks the final step of a complete answer.
func (a *answer) step(k int, last bool) {
	switch a.j.req.Route {
	case wire.RouteResponses:
		a.responsesDelta(k)
	case wire.RouteGenerate:
		a.generateEvent(k, last)
	default:
		a.chunk(k, last)
	}
}

// close renders the end of a complete stream.
func (a *answer) close() {
	switch a.j.req.Route {
	case wire.RouteResponses:
		a.responsesEnd()
	case wire.RouteGenerate:
		a.buf = append(a.buf, "data: [DONE]\n\n"...)
	default:
		a.end()
	}
}

// failed renders how the route's engine ends a generation that failed (error_after)
// and returns the cut that follows: cutError when the stream then ends normally,
// cutDrop when the engine breaks it off.
//
//   - completions and chat: the flavor's error event, then [DONE] (errorEvent);
//   - /v1/responses: vLLM turns the GenerationError into JSON and validates it as a
//     stream event (vllm/entrypoints/openai/responses/serving.py,
//     responses_stream_generator), but StreamingResponsesResponse has no error event,
//     so the validation raises and the body breaks off without a terminal event;
//   - /generate: SGLang ends the request with an abort finish reason on its last
//     event, then [DONE] (tokenizer_manager.py, _handle_abort_finish_reason).
func (a *answer) failed(s *Server) cutKind {
	switch a.j.req.Route {
	case wire.RouteResponses:
		return cutDrop
	case wire.RouteGenerate:
		a.generateAbort()
		a.buf = append(a.buf, "data: [DONE]\n\n"...)
		return cutError
	}
	a.buf = append(a.buf, "data: "...)
	a.buf = append(a.buf, s.errorEvent()...)
	a.buf = append(a.buf, "\n\ndata: [DONE]\n\n"...)
	return cutError
}

// answerRoute writes the non-streaming answer of a route with its own shape and
// reports whether it did.
func answerRoute(w http.ResponseWriter, j *job, total int) bool {
	a := &answer{j: j, sent: total}
	switch j.req.Route {
	case wire.RouteResponses:
		writeJSON(w, http.StatusOK, a.response(true))
	case wire.RouteGenerate:
		writeJSON(w, http.StatusOK, a.generateBody(true))
	default:
		return false
	}
	return true
}
