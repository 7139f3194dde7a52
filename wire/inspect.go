package wire

// Request is what Inspect learns from a request body. Absent and null
// optional fields keep their zero value (N defaults to 1).
type Request struct {
	Route           Route
	Model           string // "model"; "" when absent (vLLM then uses its only model)
	Stream          bool   // "stream"
	IncludeUsage    bool   // "stream_options.include_usage"
	ContinuousUsage bool   // "stream_options.continuous_usage_stats" or top-level "continuous_usage_stats"
	MaxTokens       int    // "max_tokens", else "max_completion_tokens"; 0 when neither
	HasMaxTokens    bool   // whether either of them was given (not null)
	IgnoreEOS       bool   // "ignore_eos"
	N               int    // "n"; 1 when absent
	Prompt          PromptSize
}

// PromptSize measures the input of a request without a tokenizer.
//
// For /v1/completions it measures "prompt" (and counts "prompt_embeds" as
// parts); for /v1/chat/completions it measures the "content" of every message
// in "messages". Other message fields (tool_calls, name, reasoning) and the
// chat template are not counted, so for chat the text size is a lower bound.
type PromptSize struct {
	// TextBytes is the number of UTF-8 bytes of prompt text after JSON
	// unescaping: string prompts, string message contents and text content
	// parts. A \uXXXX escape counts as the UTF-8 length of its rune, a
	// surrogate pair as 4 and a lone surrogate as 3 (U+FFFD).
	TextBytes int
	// TokenIDs is the number of token ids in token-id prompts.
	TokenIDs int
	// Prompts is the number of prompts: 1 for a string or a token-id list,
	// the length of a list of strings or of token-id lists; for chat, the
	// number of messages.
	Prompts int
	// Parts counts non-text inputs: chat content parts other than text
	// (image_url, input_audio, video_url, file, ...) and prompt embeddings.
	Parts int
}

// Exact reports whether the prompt consisted only of token ids, so that
// TokenIDs is its exact length in tokens.
func (p PromptSize) Exact() bool {
	return p.TokenIDs > 0 && p.TextBytes == 0 && p.Parts == 0
}

// Inspect reads a request body sent to route and returns what it holds.
//
// It scans body once, validating it as strict JSON (RFC 8259: no trailing data,
// no invalid escapes, control characters or invalid UTF-8 in strings, numbers
// as the grammar says, at most MaxDepth levels of nesting) while it extracts
// the fields of Request. It never copies the prompt: only small fields such as
// the model name are copied, so a large prompt costs no allocation. Unknown
// fields are validated and skipped; duplicate keys resolve as in encoding/json
// (the last wins); JSON null in an optional field means absent.
//
// Errors: a *SyntaxError wrapping ErrMalformed or ErrTooDeep for bad JSON
// (reported in preference to any field error), or a *FieldError wrapping
// ErrInvalidField for the first field with a wrong type or value, e.g.
// `wire: field "max_tokens": must be a non-negative integer`. A missing model is
// allowed; a missing "prompt" (RouteCompletions, unless "prompt_embeds" is
// given) or "messages" (RouteChatCompletions) is a field error. On error the
// returned Request holds only Route.
//
// Inspect does not retain body. It is safe for concurrent use.
func Inspect(route Route, body []byte) (Request, error) {
	s := scanner{data: body}
	st := inspection{req: Request{Route: route, N: 1}}
	if err := st.object(&s); err != nil {
		return Request{Route: route}, err
	}
	if err := s.end(); err != nil {
		return Request{Route: route}, err
	}
	if s.fieldErr == nil {
		st.finish(&s)
	}
	if s.fieldErr != nil {
		return Request{Route: route}, s.fieldErr
	}
	return st.req, nil
}

// inspection accumulates the fields of one request body.
type inspection struct {
	req                         Request
	prompt, messages            PromptSize
	hasPrompt, hasMessages      bool
	hasEmbeds                   bool
	maxTokens, maxCompletion    int
	hasMax, hasMaxCompletion    bool
	continuousTop, continuousSO bool
	routeFields                 // the fields of the other routes (inspect_routes.go)
}

// object scans the top-level value, which must be an object.
func (st *inspection) object(s *scanner) error {
	if s.peek() != '{' {
		if err := s.skipValue(); err != nil {
			return err
		}
		s.invalid("", "must be a JSON object")
		return nil
	}
	if err := s.enter(); err != nil {
		return err
	}
	for i := 0; ; i++ {
		key, more, err := s.member(i)
		if err != nil || !more {
			return err
		}
		if err := st.field(s, s.name(key)); err != nil {
			return err
		}
	}
}

// field scans the value of the top-level member called name.
func (st *inspection) field(s *scanner, name []byte) (err error) {
	r := &st.req
	if handled, err := st.routeField(s, name); handled {
		return err
	}
	switch string(name) {
	case "model":
		r.Model, err = optString(s, "model")
	case "stream":
		r.Stream, err = optBool(s, "stream")
	case "stream_options":
		err = st.streamOptions(s)
	case "continuous_usage_stats":
		st.continuousTop, err = optBool(s, "continuous_usage_stats")
	case "ignore_eos":
		r.IgnoreEOS, err = optBool(s, "ignore_eos")
	case "max_tokens":
		st.maxTokens, st.hasMax, err = optInt(s, "max_tokens", 0)
	case "max_completion_tokens":
		st.maxCompletion, st.hasMaxCompletion, err = optInt(s, "max_completion_tokens", 0)
	case "n":
		var has bool
		if r.N, has, err = optInt(s, "n", 1); !has {
			r.N = 1
		}
	case "prompt":
		if !r.Route.takesPrompt() {
			return s.skipValue() // not a field of chat requests; a template object in /v1/responses
		}
		st.prompt, st.hasPrompt, err = scanPrompt(s, "prompt")
	case "prompt_embeds":
		if !r.Route.takesPrompt() {
			return s.skipValue()
		}
		st.hasEmbeds, err = scanEmbeds(s)
	case "messages":
		if !r.Route.takesMessages() {
			return s.skipValue() // not a field of completions requests
		}
		st.messages, st.hasMessages, err = scanMessages(s, "messages")
	default:
		err = s.skipValue()
	}
	return err
}

func (st *inspection) streamOptions(s *scanner) error {
	st.req.IncludeUsage, st.continuousSO = false, false
	if ok, err := s.openObject("stream_options"); !ok {
		return err
	}
	for i := 0; ; i++ {
		key, more, err := s.member(i)
		if err != nil || !more {
			return err
		}
		switch string(s.name(key)) {
		case "include_usage":
			st.req.IncludeUsage, err = optBool(s, "stream_options.include_usage")
		case "continuous_usage_stats":
			st.continuousSO, err = optBool(s, "stream_options.continuous_usage_stats")
		default:
			err = s.skipValue()
		}
		if err != nil {
			return err
		}
	}
}

// finish applies the rules that need the whole body.
func (st *inspection) finish(s *scanner) {
	r := &st.req
	r.ContinuousUsage = st.continuousTop || st.continuousSO
	switch {
	case st.hasMax:
		r.MaxTokens, r.HasMaxTokens = st.maxTokens, true
	case st.hasMaxCompletion:
		r.MaxTokens, r.HasMaxTokens = st.maxCompletion, true
	}
	if st.hasEmbeds {
		st.prompt.Parts++
	}
	switch r.Route {
	case RouteCompletions:
		if !st.hasPrompt && !st.hasEmbeds {
			s.invalidOff(0, "prompt", "is required")
		}
		r.Prompt = st.prompt
	case RouteChatCompletions:
		if !st.hasMessages {
			s.invalidOff(0, "messages", "is required")
		}
		r.Prompt = st.messages
	case RouteUnknown:
		r.Prompt = st.prompt
		if !st.hasPrompt && !st.hasEmbeds {
			r.Prompt = st.messages
		}
	default:
		st.finishRoute(s)
	}
}

// optString reads a string or null ("").
func optString(s *scanner, field string) (string, error) {
	switch s.peek() {
	case '"':
		v, err := s.scanString()
		if err != nil || !v.esc {
			return string(v.raw), err
		}
		return string(unescape(make([]byte, 0, v.n), v.raw)), nil
	case 'n':
		return "", s.literal("null")
	}
	s.invalid(field, "must be a string")
	return "", s.skipValue()
}

// optBool reads a boolean or null (false).
func optBool(s *scanner, field string) (bool, error) {
	switch s.peek() {
	case 't':
		return true, s.literal("true")
	case 'f':
		return false, s.literal("false")
	case 'n':
		return false, s.literal("null")
	}
	s.invalid(field, "must be a boolean")
	return false, s.skipValue()
}

// optInt reads an integer no smaller than min, or null (has=false).
func optInt(s *scanner, field string, min int) (v int, has bool, err error) {
	msg := "must be a non-negative integer"
	if min == 1 {
		msg = "must be a positive integer"
	}
	switch c := s.peek(); {
	case c == 'n':
		return 0, false, s.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		at := s.pos
		num, isInt, err := s.scanNumber()
		if err != nil {
			return 0, false, err
		}
		if v, ok := intValue(num, isInt); ok && v >= min {
			return v, true, nil
		}
		s.invalidOff(at, field, msg)
		return 0, false, nil
	}
	s.invalid(field, msg)
	return 0, false, s.skipValue()
}

// openObject enters the object at the current position and reports true; for null or
// a value of another kind (a field error) it consumes the value and reports false.
func (s *scanner) openObject(field string) (bool, error) {
	switch s.peek() {
	case 'n':
		return false, s.literal("null")
	case '{':
		return true, s.enter()
	}
	s.invalid(field, "must be an object")
	return false, s.skipValue()
}
