package wire

// The request bodies of the routes beyond /v1/completions and /v1/chat/completions, as
// the engines define them:
//
//   - /v1/responses (vLLM, vllm/entrypoints/openai/responses/protocol.py,
//     ResponsesRequest): "input" is a string or a list of input items (messages whose
//     "content" is a string or a list of input_text/input_image/... parts), with
//     "instructions" and "max_output_tokens".
//   - /generate (SGLang, python/sglang/srt/managers/io_struct.py, GenerateReqInput):
//     "text" (a string or a list of strings) or "input_ids" (token ids, or a list of
//     them) or "input_embeds", and "sampling_params" {"max_new_tokens", "ignore_eos"}.
//   - /v1/embeddings, /pooling, /classify: "input" in the shapes of "prompt" (vLLM
//     also takes "messages" on the first two).
//   - /rerank: "query" and "documents"; /score: "text_1" and "text_2" (or "queries"
//     and "documents", "data_1" and "data_2"): strings, lists of strings, or
//     multimodal objects (counted as parts).

// routeFields are what Inspect reads from the bodies of those routes. Each input field
// has a slot, so that a duplicate key replaces its value (the last wins) rather than
// adding to it.
type routeFields struct {
	slots      [2]PromptSize
	hasSlot    [2]bool
	embeds     bool // "input_embeds" (/generate)
	maxOut     int  // "max_output_tokens" or "sampling_params.max_new_tokens"
	hasMaxOut  bool
	samplingEO bool // "sampling_params.ignore_eos"
}

// takesPrompt reports whether "prompt" and "prompt_embeds" are input fields of the
// route's body.
func (r Route) takesPrompt() bool { return r == RouteCompletions || r == RouteUnknown }

// takesMessages reports whether "messages" is an input field of the route's body.
func (r Route) takesMessages() bool {
	switch r {
	case RouteChatCompletions, RouteUnknown, RouteEmbeddings, RoutePooling:
		return true
	}
	return false
}

// pairFields are the input fields of /rerank and /score, by slot.
var pairFields = [...]struct {
	name string
	slot int
	of   Route
}{
	{"query", 0, RouteRerank}, {"documents", 1, RouteRerank},
	{"text_1", 0, RouteScore}, {"text_2", 1, RouteScore},
	{"queries", 0, RouteScore}, {"documents", 1, RouteScore},
	{"data_1", 0, RouteScore}, {"data_2", 1, RouteScore},
}

// routeField reads a top-level member that is the route's own; handled is false for
// members the common fields of Inspect cover.
func (st *inspection) routeField(s *scanner, name []byte) (handled bool, err error) {
	switch route := st.req.Route; route {
	case RouteResponses:
		return st.responsesField(s, name)
	case RouteGenerate:
		return st.generateField(s, name)
	case RouteEmbeddings, RoutePooling, RouteClassify:
		if string(name) == "input" {
			return true, st.set(0)(scanPrompt(s, "input"))
		}
	case RouteRerank, RouteScore:
		for _, f := range pairFields {
			if f.of == route && string(name) == f.name {
				return true, st.set(f.slot)(scanTexts(s, f.name))
			}
		}
	}
	return false, nil
}

// set returns the function that stores a scanned input field in slot i.
func (st *inspection) set(i int) func(PromptSize, bool, error) error {
	return func(p PromptSize, has bool, err error) error {
		st.slots[i], st.hasSlot[i] = p, has
		return err
	}
}

func (st *inspection) responsesField(s *scanner, name []byte) (bool, error) {
	var err error
	switch string(name) {
	case "input":
		err = st.set(0)(scanResponsesInput(s))
	case "instructions":
		var n int
		n, err = optStringLen(s, "instructions")
		st.slots[1], st.hasSlot[1] = PromptSize{TextBytes: n}, n > 0
	case "max_output_tokens":
		st.maxOut, st.hasMaxOut, err = optInt(s, "max_output_tokens", 0)
	default:
		return false, nil
	}
	return true, err
}

func (st *inspection) generateField(s *scanner, name []byte) (bool, error) {
	var err error
	switch string(name) {
	case "text":
		at := s.pos
		err = st.set(0)(scanPrompt(s, "text"))
		if st.slots[0].TokenIDs > 0 {
			s.invalidOff(at, "text", "must be a string or an array of strings")
		}
	case "input_ids":
		at := s.pos
		err = st.set(1)(scanPrompt(s, "input_ids"))
		if st.slots[1].TextBytes > 0 {
			s.invalidOff(at, "input_ids", "must be an array of token ids or an array of arrays of token ids")
		}
	case "input_embeds":
		st.embeds, err = scanEmbeds(s)
	case "sampling_params":
		err = st.samplingParams(s)
	case "max_tokens", "max_completion_tokens", "ignore_eos", "n":
		err = s.skipValue() // not fields of /generate: its limits are in sampling_params
	default:
		return false, nil
	}
	return true, err
}

// samplingParams reads the "sampling_params" of a /generate body.
func (st *inspection) samplingParams(s *scanner) error {
	st.maxOut, st.hasMaxOut, st.samplingEO = 0, false, false
	if ok, err := s.openObject("sampling_params"); !ok {
		return err
	}
	for i := 0; ; i++ {
		key, more, err := s.member(i)
		if err != nil || !more {
			return err
		}
		switch string(s.name(key)) {
		case "max_new_tokens":
			st.maxOut, st.hasMaxOut, err = optInt(s, "sampling_params.max_new_tokens", 0)
		case "ignore_eos":
			st.samplingEO, err = optBool(s, "sampling_params.ignore_eos")
		default:
			err = s.skipValue()
		}
		if err != nil {
			return err
		}
	}
}

// scanResponsesInput measures the "input" of a /v1/responses body: a string, or a list
// of input items measured as chat messages are (the text of their "content").
func scanResponsesInput(s *scanner) (PromptSize, bool, error) {
	switch s.peek() {
	case '"':
		v, err := s.scanString()
		return PromptSize{TextBytes: v.n, Prompts: 1}, true, err
	case '[', 'n':
		return scanMessages(s, "input")
	}
	s.invalid("input", "must be a string or an array of input items")
	return PromptSize{}, true, s.skipValue()
}

// scanTexts measures an input of /rerank or /score: a string, or a list whose elements
// are strings (text) or objects (multimodal inputs, counted as parts). has is false for
// null.
func scanTexts(s *scanner, field string) (p PromptSize, has bool, err error) {
	switch s.peek() {
	case 'n':
		return p, false, s.literal("null")
	case '"':
		v, err := s.scanString()
		return PromptSize{TextBytes: v.n, Prompts: 1}, true, err
	case '{':
		return PromptSize{Parts: 1, Prompts: 1}, true, s.skipValue()
	case '[':
	default:
		s.invalid(field, "must be a string, an object or an array of them")
		return p, true, s.skipValue()
	}
	if err := s.enter(); err != nil {
		return p, true, err
	}
	for i := 0; ; i++ {
		more, err := s.element(i)
		if err != nil || !more {
			return p, true, err
		}
		p.Prompts++
		switch s.peek() {
		case '"':
			var v str
			v, err = s.scanString()
			p.TextBytes += v.n
		case '{':
			p.Parts++
			err = s.skipValue()
		default:
			s.invalidAt(s.pos, "must be a string or an object", "%s[%d]", field, i)
			err = s.skipValue()
		}
		if err != nil {
			return p, true, err
		}
	}
}

// optStringLen reads a string or null (0) and returns its decoded length, without
// copying it.
func optStringLen(s *scanner, field string) (int, error) {
	switch s.peek() {
	case '"':
		v, err := s.scanString()
		return v.n, err
	case 'n':
		return 0, s.literal("null")
	}
	s.invalid(field, msgString)
	return 0, s.skipValue()
}

func (p PromptSize) plus(q PromptSize) PromptSize {
	return PromptSize{TextBytes: p.TextBytes + q.TextBytes, TokenIDs: p.TokenIDs + q.TokenIDs, Prompts: p.Prompts + q.Prompts, Parts: p.Parts + q.Parts}
}

// finishRoute applies the rules of the routes beyond completions and chat that need the
// whole body: required inputs, the prompt size, and the output limit.
func (st *inspection) finishRoute(s *scanner) {
	r := &st.req
	r.Prompt = st.slots[0].plus(st.slots[1])
	switch r.Route {
	case RouteResponses:
		if !st.hasSlot[0] {
			s.invalidOff(0, "input", "is required")
		}
		r.MaxTokens, r.HasMaxTokens = st.maxOut, st.hasMaxOut
	case RouteGenerate:
		if !st.hasSlot[0] && !st.hasSlot[1] && !st.embeds {
			s.invalidOff(0, "text", `one of "text", "input_ids" or "input_embeds" is required`)
		}
		if st.embeds {
			r.Prompt.Parts++
		}
		r.MaxTokens, r.HasMaxTokens, r.IgnoreEOS = st.maxOut, st.hasMaxOut, st.samplingEO
	case RouteEmbeddings, RoutePooling, RouteClassify:
		switch {
		case st.hasSlot[0]:
		case st.hasMessages && r.Route.takesMessages():
			r.Prompt = st.messages
		default:
			s.invalidOff(0, "input", "is required")
		}
	case RouteRerank, RouteScore:
		first, second := "query", "documents"
		if r.Route == RouteScore {
			first, second = "text_1", "text_2"
		}
		if !st.hasSlot[0] {
			s.invalidOff(0, first, "is required")
		} else if !st.hasSlot[1] {
			s.invalidOff(0, second, "is required")
		}
	}
}
