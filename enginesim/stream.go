package enginesim

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"

	"github.com/slogate/slogate/wire"
)

// stream carries one request's progress from the engine loop to its handler. Its fields
// are guarded by Server.mu; notify has room for one wake-up and never blocks the engine.
type stream struct {
	notify chan struct{}
	steps  []int // tokens per engine step, not yet taken by the handler
	done   bool
	abort  bool // the engine aborted the request (vLLM sleep mode=abort, sleep.go)
}

func newStream() *stream { return &stream{notify: make(chan struct{}, 1)} }

// deliver records an emission; the caller holds Server.mu.
func (st *stream) deliver(e Emission) {
	st.steps = append(st.steps, e.Tokens)
	st.done = st.done || e.Done
	st.abort = st.abort || e.Done && e.Reason == "abort"
	select {
	case st.notify <- struct{}{}:
	default:
	}
}

// take moves the undelivered steps of st into buf and reports whether the engine is done.
// A request the engine aborted ends with a step of no tokens and finish reason "abort".
func (s *Server) take(st *stream, j *job, buf []int) ([]int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	buf = append(buf[:0], st.steps...)
	st.steps = st.steps[:0]
	if st.abort && j.reason != "abort" {
		j.reason = "abort"
		buf = append(buf, 0)
	}
	return buf, st.done
}

// answer renders j's output as OpenAI chunks; one per engine step, as engines stream.
type answer struct {
	j      *job
	chat   bool
	opened bool   // the events before the first token are out (see open)
	seq    int    // the next sequence_number of a Responses stream
	sent   int    // output tokens rendered so far
	buf    []byte // events not yet written
	head   []byte // the chunk envelope up to "choices", built once
	text   []byte // scratch for one chunk's text
}

func (a *answer) envelope() wire.Chunk {
	c := wire.Chunk{Object: "text_completion", Created: a.j.created, Model: a.j.model, ID: "cmpl-" + a.j.hexID()}
	if a.chat {
		c.Object, c.ID = "chat.completion.chunk", "chatcmpl-"+a.j.hexID()
	}
	return c
}

func (a *answer) usage() *wire.Usage {
	return &wire.Usage{PromptTokens: a.j.prompt, CompletionTokens: a.sent, TotalTokens: a.j.prompt + a.sent}
}

// chunk renders the next k tokens as one chunk (two for a chat chunk that crosses from
// reasoning to content), appending "data: ...\n\n" events to a.buf.
func (a *answer) chunk(k int, last bool) {
	if a.chat && a.sent < a.j.faults.Reasoning && a.sent+k > a.j.faults.Reasoning {
		split := a.j.faults.Reasoning - a.sent
		a.chunk(split, false)
		k -= split
	}
	a.text = a.j.appendText(a.text[:0], a.sent, a.sent+k)
	reasoning := a.chat && a.sent < a.j.faults.Reasoning
	a.sent += k
	finish := ""
	if last {
		finish = a.j.reason
	}
	a.buf = a.appendTokenChunk(a.buf, string(a.text), reasoning, finish, a.j.req.ContinuousUsage)
}

// role renders the chat stream's opening chunk: the assistant role and empty content.
func (a *answer) role() {
	empty := ""
	c := a.envelope()
	c.Choices = []wire.Choice{{Delta: &wire.Delta{Role: "assistant", Content: &empty}}}
	if a.j.req.ContinuousUsage {
		c.Usage = a.usage()
	}
	a.event(c)
}

// end renders the usage chunk (when asked for) and the [DONE] marker.
func (a *answer) end() {
	if a.j.req.IncludeUsage {
		c := a.envelope()
		c.Usage = a.usage()
		a.event(c)
	}
	a.buf = append(a.buf, "data: [DONE]\n\n"...)
}

func (a *answer) event(c wire.Chunk) {
	a.buf = append(a.buf, "data: "...)
	a.buf = appendJSON(a.buf, c)
	a.buf = append(a.buf, '\n')
}

// appendJSON appends v encoded as the engines encode it: no HTML escaping, and a newline.
func appendJSON(dst []byte, v any) []byte {
	b := bytes.NewBuffer(dst)
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err) // the wire types always encode
	}
	return b.Bytes()
}

// streamJob streams j as server-sent events until it finishes, the client leaves, or a
// fault cuts it short.
func (s *Server) streamJob(w http.ResponseWriter, r *http.Request, j *job, st *stream) {
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	_ = rc.Flush()
	a := &answer{j: j, chat: j.req.Route == wire.RouteChatCompletions}
	var steps []int
	for {
		select {
		case <-st.notify:
		case <-r.Context().Done():
			return
		}
		var done bool
		steps, done = s.take(st, j, steps)
		for i, k := range steps {
			a.open()
			cut, limit := a.j.faults.cut(a.sent, k)
			a.step(limit, done && i == len(steps)-1 && !cut)
			if cut {
				s.fail(w, rc, r, a)
				return
			}
		}
		if done {
			a.close()
		}
		if _, err := w.Write(a.buf); err != nil {
			return
		}
		a.buf = a.buf[:0]
		if err := rc.Flush(); err != nil || done {
			return
		}
	}
}

// A cutting fault: what ends a stream early.
type cutKind uint8

const (
	cutNone  cutKind = iota
	cutStall         // stop sending, keep the connection open
	cutDrop          // tear the connection down
	cutError         // end the generation with an error event, then [DONE]
)

// first returns the cutting fault that fires first and the output token count at which
// it does (a tie goes to the drop, then the error, then the stall).
func (f Faults) first() (cutKind, int) {
	kind, at := cutNone, 0
	for _, c := range []struct {
		kind cutKind
		at   int
	}{{cutDrop, f.DropAfter}, {cutError, f.ErrorAfter}, {cutStall, f.StallAfter}} {
		if c.at > 0 && (at == 0 || c.at < at) {
			kind, at = c.kind, c.at
		}
	}
	return kind, at
}

// cut reports whether a cutting fault fires within the next k tokens after sent, and
// how many of the k tokens go out before it does. (The earliest fault cuts: checking
// them in a fixed order let a later stall cut a multi-token chunk first, so with
// speculative decoding a drop_after=3 stream could carry more than 3 tokens.)
func (f Faults) cut(sent, k int) (bool, int) {
	if kind, at := f.first(); kind != cutNone && sent+k >= at {
		return true, max(at-sent, 0)
	}
	return false, k
}

// fail carries out the fault that cut a stream: the tokens before the cut are flushed,
// then the stream hangs until the client leaves (stall), the connection is torn down
// without the end of the stream (drop), or the generation ends with an error event and
// [DONE], as vLLM and SGLang end a generation that failed (error). A drop closes the
// connection right after the last chunk, as uvicorn, the engines' HTTP server, does
// when the application raises once the answer has started
// (uvicorn/protocols/http/httptools_impl.py, RequestResponseCycle.run_asgi:
// transport.close()): the last bytes and the FIN arrive together.
func (s *Server) fail(w http.ResponseWriter, rc *http.ResponseController, r *http.Request, a *answer) {
	kind, _ := a.j.faults.first()
	s.traceCut(a.j, kind)
	if kind == cutError {
		kind = a.failed(s)
	}
	_, _ = w.Write(a.buf)
	_ = rc.Flush()
	switch kind {
	case cutDrop:
		s.release(a.j.id)
		panic(http.ErrAbortHandler)
	case cutError:
		return
	}
	<-r.Context().Done()
}

// generationFailed is the message of the simulated failure.
const generationFailed = "enginesim: simulated generation failure (error_after)"

// errorEvent returns the data of the error event the flavor's engine sends when a
// generation fails mid-stream, byte for byte: Python's json.dumps, with its ", " and
// ": " separators.
//
//   - vLLM (vllm/entrypoints/openai/engine/serving.py, create_streaming_error_response:
//     json.dumps(ErrorResponse(error=ErrorInfo(...)).model_dump())): the nested
//     {"error": {"message", "type", "param", "code"}}, code the HTTP status.
//   - SGLang (python/sglang/srt/entrypoints/openai/serving_base.py,
//     create_streaming_error_response: json.dumps(ErrorResponse(...).model_dump())):
//     the flat {"object": "error", "message", "type", "param", "code"}.
func (s *Server) errorEvent() string {
	if s.cfg.Flavor == FlavorSGLang {
		return `{"object": "error", "message": "` + generationFailed + `", "type": "InternalServerError", "param": null, "code": 500}`
	}
	return `{"error": {"message": "` + generationFailed + `", "type": "InternalServerError", "param": null, "code": 500}}`
}

// answerJob waits for j to finish and sends the whole answer in one JSON response.
func (s *Server) answerJob(w http.ResponseWriter, r *http.Request, j *job, st *stream) {
	var steps []int
	total := 0
	for done := false; !done; {
		select {
		case <-st.notify:
		case <-r.Context().Done():
			return
		}
		steps, done = s.take(st, j, steps)
		for _, k := range steps {
			total += k
		}
	}
	switch kind, _ := j.faults.first(); kind {
	case cutError:
		// A non-streaming answer whose generation failed is an error response with the
		// status in its code (vLLM: GenerationError -> create_error_response).
		s.traceCut(j, kind)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, s.errorEvent())
		return
	case cutDrop, cutStall:
		a := &answer{j: j}
		s.fail(w, http.NewResponseController(w), r, a)
		return
	}
	if answerRoute(w, j, total) {
		return
	}
	// chat selects the chat envelope, so the id is "chatcmpl-..." as in the stream (it
	// was "cmpl-..." for non-streaming chat answers).
	a := &answer{j: j, chat: j.req.Route == wire.RouteChatCompletions, sent: total}
	text := string(j.appendText(nil, 0, total))
	reason := j.reason
	c := a.envelope()
	c.Usage = a.usage()
	if j.req.Route == wire.RouteChatCompletions {
		c.Object = "chat.completion"
		msg := &wire.Message{Role: "assistant", Content: &text}
		if n := min(j.faults.Reasoning, total); n > 0 {
			thought := text[:len(j.appendText(nil, 0, n))]
			rest := text[len(thought):]
			msg.ReasoningContent, msg.Content = &thought, &rest
		}
		c.Choices = []wire.Choice{{Message: msg, FinishReason: &reason}}
	} else {
		c.Choices = []wire.Choice{{Text: text, FinishReason: &reason}}
	}
	writeJSON(w, http.StatusOK, c)
}

// hexID returns the request id as vLLM formats it: 16 hex digits.
func (j *job) hexID() string {
	s := strconv.FormatUint(j.seed, 16)
	for len(s) < 16 {
		s = "0" + s
	}
	return s
}
