package wire

// ChunkSummary is what measuring a response needs from one stream chunk (or a whole
// non-streaming response), read by ScanChunk without decoding it: the hot path of a
// proxy that sees every chunk of every stream.
type ChunkSummary struct {
	// OutputBytes is the decoded length of the output the chunk carries, as
	// Chunk.OutputBytes defines it: text, delta or message content, reasoning, and
	// tool-call names and arguments.
	OutputBytes int
	// Choices is the number of elements of "choices".
	Choices int
	// FinishReason is the first non-null finish_reason, "" if none.
	FinishReason string
	// Usage is the usage report when HasUsage is set.
	Usage    Usage
	HasUsage bool
	// IsError marks an error sent in the stream: an "error" member that is not null, or
	// "object": "error" (and, per route, see ScanFor).
	IsError bool
	// End marks the terminal event of a stream that has no [DONE]: the Responses API's
	// response.completed, response.incomplete, response.failed or error.
	End bool
	// CachedTokens are the prompt tokens served from the prefix cache where the route
	// reports them beside its token counts rather than in a usage object (SGLang's
	// meta_info.cached_tokens), so that reading them allocates nothing.
	CachedTokens int
	// Cumulative says that OutputBytes and Usage are running totals of the answer so
	// far rather than this chunk's share (SGLang's /generate stream).
	Cumulative bool
}

// UsageOnly reports whether the chunk has no choices and a usage report, as the last
// chunk of a stream with stream_options.include_usage does.
func (c ChunkSummary) UsageOnly() bool { return c.Choices == 0 && c.HasUsage }

// ScanChunk summarises one chunk's JSON. It validates the whole input as strict JSON
// and fails with an error wrapping ErrMalformed or ErrTooDeep when it is not, and with
// ErrUnexpectedShape when a field it reads has the wrong type; it allocates nothing for
// the usual chunk (finish reasons other than the common ones are copied). Keys are
// matched exactly, as the engines write them. It does not retain data and is safe for
// concurrent use.
func ScanChunk(data []byte) (ChunkSummary, error) { return ScanFor(RouteCompletions, data) }

// The readers below walk objects with explicit loops rather than callbacks, so that the
// scanner stays on the stack.

func (c *ChunkSummary) scanTop(s *scanner) error {
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
		if err := c.topField(s, key); err != nil {
			return err
		}
	}
}

func (c *ChunkSummary) topField(s *scanner, key []byte) error {
	switch string(key) {
	case "choices":
		return c.choices(s)
	case "usage":
		if s.peek() == 'n' {
			return s.literal("null")
		}
		c.HasUsage = true
		return c.Usage.scan(s)
	case "error":
		if s.peek() == 'n' {
			return s.literal("null")
		}
		c.IsError = true
		return s.skipValue()
	case "object":
		v, err := optStr(s, "object")
		c.IsError = c.IsError || string(v.raw) == "error"
		return err
	}
	return s.skipValue()
}

func (c *ChunkSummary) choices(s *scanner) error {
	if s.peek() == 'n' {
		return s.literal("null")
	}
	if s.peek() != '[' {
		return shapeError(`"choices" is not an array`)
	}
	if err := s.enter(); err != nil {
		return err
	}
	for i := 0; ; i++ {
		more, err := s.element(i)
		if err != nil || !more {
			return err
		}
		c.Choices++
		if err := c.choice(s); err != nil {
			return err
		}
	}
}

// choice reads one element of "choices".
func (c *ChunkSummary) choice(s *scanner) error {
	if s.peek() != '{' {
		return shapeError("a choice is not an object")
	}
	if err := s.enter(); err != nil {
		return err
	}
	for i := 0; ; i++ {
		key, more, err := nextKey(s, i)
		if err != nil || !more {
			return err
		}
		switch string(key) {
		case "text":
			var v str
			v, err = optStr(s, "text")
			c.OutputBytes += v.n
		case "delta", "message":
			err = c.message(s)
		case "finish_reason":
			var v str
			v, err = optStr(s, "finish_reason")
			if err == nil && v.raw != nil && c.FinishReason == "" {
				c.FinishReason = finishReason(v)
			}
		default:
			err = s.skipValue()
		}
		if err != nil {
			return err
		}
	}
}

// message reads a delta or message object.
func (c *ChunkSummary) message(s *scanner) error {
	if s.peek() == 'n' {
		return s.literal("null")
	}
	if s.peek() != '{' {
		return shapeError("a delta or message is not an object")
	}
	if err := s.enter(); err != nil {
		return err
	}
	for i := 0; ; i++ {
		key, more, err := nextKey(s, i)
		if err != nil || !more {
			return err
		}
		switch string(key) {
		case "content", "reasoning_content", "reasoning":
			var v str
			v, err = optStr(s, "content")
			c.OutputBytes += v.n
		case "tool_calls":
			err = c.toolCalls(s)
		default:
			err = s.skipValue()
		}
		if err != nil {
			return err
		}
	}
}

func (c *ChunkSummary) toolCalls(s *scanner) error {
	if s.peek() == 'n' {
		return s.literal("null")
	}
	if s.peek() != '[' {
		return shapeError(`"tool_calls" is not an array`)
	}
	if err := s.enter(); err != nil {
		return err
	}
	for i := 0; ; i++ {
		more, err := s.element(i)
		if err != nil || !more {
			return err
		}
		if err := c.toolCall(s); err != nil {
			return err
		}
	}
}

func (c *ChunkSummary) toolCall(s *scanner) error {
	if s.peek() != '{' {
		return shapeError("a tool call is not an object")
	}
	if err := s.enter(); err != nil {
		return err
	}
	for i := 0; ; i++ {
		key, more, err := nextKey(s, i)
		if err != nil || !more {
			return err
		}
		if string(key) == "function" && s.peek() != 'n' {
			err = c.function(s)
		} else {
			err = s.skipValue()
		}
		if err != nil {
			return err
		}
	}
}

func (c *ChunkSummary) function(s *scanner) error {
	if s.peek() != '{' {
		return shapeError(`"function" is not an object`)
	}
	if err := s.enter(); err != nil {
		return err
	}
	for i := 0; ; i++ {
		key, more, err := nextKey(s, i)
		if err != nil || !more {
			return err
		}
		if k := string(key); k == "name" || k == "arguments" {
			var v str
			v, err = optStr(s, "function")
			c.OutputBytes += v.n
		} else {
			err = s.skipValue()
		}
		if err != nil {
			return err
		}
	}
}

// scan reads a usage object: the OpenAI names, or the Responses API's (input_tokens,
// output_tokens, input_tokens_details), which mean the same.
func (u *Usage) scan(s *scanner) error {
	if s.peek() != '{' {
		return shapeError(`"usage" is not an object`)
	}
	if err := s.enter(); err != nil {
		return err
	}
	for i := 0; ; i++ {
		key, more, err := nextKey(s, i)
		if err != nil || !more {
			return err
		}
		switch string(key) {
		case "prompt_tokens", "input_tokens":
			err = optCount(s, &u.PromptTokens)
		case "completion_tokens", "output_tokens":
			err = optCount(s, &u.CompletionTokens)
		case "total_tokens":
			err = optCount(s, &u.TotalTokens)
		case "prompt_tokens_details", "input_tokens_details":
			err = u.details(s)
		default:
			err = s.skipValue()
		}
		if err != nil {
			return err
		}
	}
}

func (u *Usage) details(s *scanner) error {
	if s.peek() == 'n' {
		return s.literal("null")
	}
	if s.peek() != '{' {
		return shapeError(`"prompt_tokens_details" is not an object`)
	}
	if err := s.enter(); err != nil {
		return err
	}
	u.PromptTokensDetails = &PromptTokensDetails{}
	for i := 0; ; i++ {
		key, more, err := nextKey(s, i)
		if err != nil || !more {
			return err
		}
		if string(key) == "cached_tokens" {
			err = optCount(s, &u.PromptTokensDetails.CachedTokens)
		} else {
			err = s.skipValue()
		}
		if err != nil {
			return err
		}
	}
}
