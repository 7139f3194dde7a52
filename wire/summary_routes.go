package wire

import "bytes"

// ScanFor summarises one stream event (or a whole non-streaming body) of a response
// sent to route, in that route's shape: ScanResponses for /v1/responses, ScanGenerate
// for SGLang's /generate, ScanChunk for every other route (OpenAI chunks, and the
// usage of pooling answers). It validates, allocates and fails as ScanChunk does, and
// is safe for concurrent use.
func ScanFor(route Route, data []byte) (ChunkSummary, error) {
	// One scanner for every route, called directly, so that it stays on the stack.
	s := scanner{data: data}
	var c ChunkSummary
	var rs respState
	var err error
	switch route {
	case RouteResponses:
		err = rs.object(&s, true)
	case RouteGenerate:
		c.Cumulative = true
		err = c.scanGenerate(&s)
	default:
		err = c.scanTop(&s)
	}
	if err == nil {
		err = s.end()
	}
	if err != nil {
		return ChunkSummary{}, malformedFirst(data, err)
	}
	if route == RouteResponses {
		c = rs.summary()
	}
	return c, nil
}

// ScanResponses summarises one event of a Responses API stream, or a whole response
// object, as vLLM writes them (vllm/entrypoints/openai/responses/api_router.py,
// _convert_stream_to_sse_events: `event: <type>` and `data: <event JSON>`, no [DONE];
// serving.py, responses_stream_generator; the event types of openai-python's
// openai.types.responses):
//
//   - an event whose "type" ends in ".delta" with a string "delta" (output_text,
//     reasoning_text, function_call_arguments, refusal, ...) carries that much output;
//   - response.completed and response.incomplete end the stream (End), with the totals
//     in response.usage {input_tokens, output_tokens, input_tokens_details.cached_tokens}
//     read into Usage as prompt and completion tokens;
//   - response.failed and error end it with an error (End and IsError), as does an
//     "error" member that is not null;
//   - a response object (no "type", as a non-streaming answer) carries the text of its
//     output items as output, and its usage.
//
// FinishReason comes from the response's status: "stop" for completed, "length" for
// incomplete (max_output_tokens; "content_filter" when that is the reason), "error" for
// failed, "abort" for cancelled. vLLM reports a response cut by max_output_tokens as
// response.completed with status "incomplete".
func ScanResponses(data []byte) (ChunkSummary, error) { return ScanFor(RouteResponses, data) }

// respType is what an event's "type" says, as far as measuring goes.
type respType uint8

const (
	respNone   respType = iota // no "type": a response object
	respOther                  // an event that carries nothing measured
	respDelta                  // a *.delta event
	respDone                   // response.completed or response.incomplete
	respFailed                 // response.failed or error
)

type respState struct {
	c          ChunkSummary
	typ        respType
	delta      int // the "delta" string's length
	outputText int // the text of output items
	status     string
	reason     string // incomplete_details.reason
}

func (st *respState) summary() ChunkSummary {
	c := st.c
	switch st.typ {
	case respNone:
		c.OutputBytes = st.outputText
		c.IsError = c.IsError || st.status == "failed"
	case respDelta:
		c.OutputBytes = st.delta
	case respDone:
		c.End = true
	case respFailed:
		c.End, c.IsError = true, true
	}
	if st.typ != respDelta {
		c.FinishReason = responseFinish(st.status, st.reason)
	}
	return c
}

// responseFinish maps a response status to a finish reason (see ScanResponses).
func responseFinish(status, reason string) string {
	switch status {
	case "completed":
		return "stop"
	case "incomplete":
		if reason == "content_filter" {
			return "content_filter"
		}
		return "length"
	case "failed":
		return "error"
	case "cancelled":
		return "abort"
	}
	return ""
}

// object reads an event (top) or the response object inside one.
func (st *respState) object(s *scanner, top bool) error {
	if s.peek() != '{' {
		return shapeError("not a JSON object")
	}
	if err := s.enter(); err != nil {
		return err
	}
	for i := 0; ; i++ {
		key, more, err := nextKey(s, i)
		if err != nil || !more {
			return err
		}
		if err := st.member(s, key, top); err != nil {
			return err
		}
	}
}

func (st *respState) member(s *scanner, key []byte, top bool) error {
	switch k := string(key); {
	case k == "type" && top:
		v, err := optStr(s, "type")
		st.typ = eventType(v.raw)
		return err
	case k == "delta" && top && s.peek() == '"':
		v, err := s.scanString()
		st.delta = v.n
		return err
	case k == "response" && top && s.peek() == '{':
		return st.object(s, false)
	case k == "error":
		if s.peek() == 'n' {
			return s.literal("null")
		}
		st.c.IsError = true
		return s.skipValue()
	case k == "status":
		v, err := optStr(s, "status")
		st.status = responseStatus(v.raw)
		return err
	case k == "usage":
		if s.peek() == 'n' {
			return s.literal("null")
		}
		st.c.HasUsage = true
		return st.c.Usage.scan(s)
	case k == "incomplete_details" && s.peek() == '{':
		return st.incomplete(s)
	case k == "output" && s.peek() == '[':
		return st.outputItems(s)
	}
	return s.skipValue()
}

// eventType classifies an event type without allocating.
func eventType(t []byte) respType {
	switch string(t) {
	case "response.completed", "response.incomplete":
		return respDone
	case "response.failed", "error":
		return respFailed
	}
	if bytes.HasSuffix(t, []byte(".delta")) {
		return respDelta
	}
	return respOther
}

// responseStatus returns the statuses that name a finish, shared so that reading them
// does not allocate; others are "".
func responseStatus(v []byte) string {
	for _, st := range [...]string{"completed", "incomplete", "failed", "cancelled"} {
		if string(v) == st {
			return st
		}
	}
	return ""
}

func (st *respState) incomplete(s *scanner) error {
	if err := s.enter(); err != nil {
		return err
	}
	for i := 0; ; i++ {
		key, more, err := nextKey(s, i)
		if err != nil || !more {
			return err
		}
		if string(key) == "reason" && s.peek() == '"' {
			v, err := s.scanString()
			if string(v.raw) == "content_filter" {
				st.reason = "content_filter"
			}
			if err != nil {
				return err
			}
			continue
		}
		if err := s.skipValue(); err != nil {
			return err
		}
	}
}

// outputItems adds up the text of a response's output items: the "text" of the parts in
// each item's "content" (output_text, reasoning_text) and function-call "arguments".
func (st *respState) outputItems(s *scanner) error {
	if err := s.enter(); err != nil {
		return err
	}
	for i := 0; ; i++ {
		more, err := s.element(i)
		if err != nil || !more {
			return err
		}
		if s.peek() != '{' {
			return shapeError("an output item is not an object")
		}
		if err := st.outputItem(s); err != nil {
			return err
		}
	}
}

// outputItem reads one output item, or (nested) one content part: both carry their
// text in "text", "arguments" or a "content" list of parts.
func (st *respState) outputItem(s *scanner) error {
	if err := s.enter(); err != nil {
		return err
	}
	for i := 0; ; i++ {
		key, more, err := nextKey(s, i)
		if err != nil || !more {
			return err
		}
		switch k := string(key); {
		case (k == "text" || k == "arguments") && s.peek() == '"':
			var v str
			v, err = s.scanString()
			st.outputText += v.n
		case k == "content" && s.peek() == '[':
			err = st.outputItems(s)
		default:
			err = s.skipValue()
		}
		if err != nil {
			return err
		}
	}
}
