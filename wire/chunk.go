package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Usage is the token accounting of a response, or of a stream chunk when the
// client asked for usage. The field order is vLLM's, so encoding reproduces
// its bytes.
type Usage struct {
	PromptTokens        int                  `json:"prompt_tokens"`
	TotalTokens         int                  `json:"total_tokens"`
	CompletionTokens    int                  `json:"completion_tokens"`
	PromptTokensDetails *PromptTokensDetails `json:"prompt_tokens_details,omitempty"`
}

// PromptTokensDetails breaks down the prompt tokens; vLLM reports it when
// started with --enable-prompt-tokens-details.
type PromptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"` // prompt tokens served from the prefix cache
}

// ToolCall is a tool call of a chat message, or a fragment of one in a stream
// delta (fragments with the same Index belong to the same call). The field
// order is that of vLLM's DeltaToolCall.
type ToolCall struct {
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Index    int          `json:"index"`
	Function ToolFunction `json:"function"`
}

// ToolFunction is the function a tool call invokes; in a stream, Arguments
// arrive in fragments.
type ToolFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"`
}

// Delta is the increment a chat stream chunk carries for one choice. Nil
// pointers are omitted when encoding and a pointer to "" is encoded as "", as
// vLLM does ({"role":"assistant","content":""} opens a stream).
// ReasoningContent and Reasoning are the two names engines use for the
// reasoning channel (vLLM renamed the first to the second); either counts as
// output.
type Delta struct {
	Role             string     `json:"role,omitempty"`
	Content          *string    `json:"content,omitempty"`
	ReasoningContent *string    `json:"reasoning_content,omitempty"`
	Reasoning        *string    `json:"reasoning,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
}

// Message is the message of a non-streaming chat response choice. Content is
// null when the model only called tools.
type Message struct {
	Role             string     `json:"role"`
	Content          *string    `json:"content"`
	ReasoningContent *string    `json:"reasoning_content,omitempty"`
	Reasoning        *string    `json:"reasoning,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
}

// Choice is one choice of a chunk or response. Its kind follows from which
// field is set: Delta (chat stream), Message (chat response) or neither
// (completions, using Text). Decoding fills whatever is present and tolerates
// absent fields.
//
// Encoding (MarshalJSON) writes the shape vLLM writes for that kind, with
// explicit nulls:
//
//	completions: {"index","text","logprobs","finish_reason","stop_reason"}
//	chat stream: {"index","delta","logprobs","finish_reason"}, plus
//	             "stop_reason" once finish_reason is set
//	chat:        {"index","message","logprobs","finish_reason","stop_reason"}
type Choice struct {
	Index        int             `json:"index"`
	Text         string          `json:"text"`
	Delta        *Delta          `json:"delta"`
	Message      *Message        `json:"message"`
	Logprobs     json.RawMessage `json:"logprobs"`      // kept raw; nil for null, and nil encodes as null
	FinishReason *string         `json:"finish_reason"` // nil while generating; "stop", "length", "tool_calls", "abort", ...
	StopReason   any             `json:"stop_reason"`   // stop string, stop token id (float64 once decoded) or nil
}

type completionChoiceJSON struct {
	Index        int             `json:"index"`
	Text         string          `json:"text"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
	StopReason   any             `json:"stop_reason"`
}

type deltaChoiceJSON struct {
	Index        int             `json:"index"`
	Delta        *Delta          `json:"delta"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
	StopReason   json.RawMessage `json:"stop_reason,omitempty"`
}

type messageChoiceJSON struct {
	Index        int             `json:"index"`
	Message      *Message        `json:"message"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
	StopReason   any             `json:"stop_reason"`
}

// MarshalJSON encodes the choice in vLLM's shape for its kind (see Choice).
// It does not escape <, > or &. It is safe for concurrent use.
func (c Choice) MarshalJSON() ([]byte, error) {
	switch {
	case c.Delta != nil:
		v := deltaChoiceJSON{Index: c.Index, Delta: c.Delta, Logprobs: c.Logprobs, FinishReason: c.FinishReason}
		if c.FinishReason != nil {
			stop, err := marshal(c.StopReason)
			if err != nil {
				return nil, err
			}
			v.StopReason = stop
		}
		return marshal(v)
	case c.Message != nil:
		return marshal(messageChoiceJSON{c.Index, c.Message, c.Logprobs, c.FinishReason, c.StopReason})
	}
	return marshal(completionChoiceJSON{c.Index, c.Text, c.Logprobs, c.FinishReason, c.StopReason})
}

// marshal encodes v without escaping <, > and & (engines do not), leaving
// that choice to the outermost encoder.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// Chunk is the envelope of an OpenAI stream chunk and of a non-streaming
// response, which share it: Object is "text_completion" (completions, both),
// "chat.completion.chunk" (chat stream) or "chat.completion" (chat response).
// A usage-only chunk (the last one when stream_options.include_usage is set)
// has no choices and a Usage. An error sent inside a stream decodes into Error
// (both {"error":{...}} and the flat {"object":"error",...} form).
//
// Encoding writes vLLM's shape: "usage" is null when Usage is nil, "choices"
// is [] when Choices is nil, and a Chunk with Error set encodes as the error
// body {"error":{...}} alone. This is the shape of vLLM releases that always
// serialize every chunk field; newer releases omit "usage" until it is set,
// which decoders treat alike. For vLLM's exact bytes, encode with a
// json.Encoder with SetEscapeHTML(false): json.Marshal escapes <, > and &
// (as in "<think>"), which vLLM does not.
type Chunk struct {
	ID      string    `json:"id"`
	Object  string    `json:"object"`
	Created int64     `json:"created"`
	Model   string    `json:"model"`
	Choices []Choice  `json:"choices"`
	Usage   *Usage    `json:"usage"`
	Error   *APIError `json:"error,omitempty"`
}

// MarshalJSON encodes the chunk in vLLM's shape (see Chunk). It does not
// escape <, > or &. It is safe for concurrent use.
func (c Chunk) MarshalJSON() ([]byte, error) {
	if c.Error != nil {
		return marshal(ErrorBody{Error: *c.Error})
	}
	type envelope Chunk // no methods: plain struct encoding
	if c.Choices == nil {
		c.Choices = []Choice{}
	}
	return marshal(envelope(c))
}

// DecodeChunk decodes the data of one stream event (or a whole non-streaming
// response body). It fails with an error wrapping ErrMalformed when data is
// not valid JSON, or ErrUnexpectedShape when it is not an object or a field
// has the wrong type. Absent fields keep their zero values. DecodeChunk does
// not retain data and is safe for concurrent use.
func DecodeChunk(data []byte) (Chunk, error) {
	var c Chunk
	if err := decodeObject(data, &c, "chunk"); err != nil {
		return Chunk{}, err
	}
	if c.Error == nil && c.Object == "error" {
		e, err := DecodeError(data)
		if err != nil {
			return Chunk{}, err
		}
		c.Error = &e
	}
	if c.Error != nil {
		c.Error.Code = normalizeCode(c.Error.Code)
	}
	for i := range c.Choices {
		if string(c.Choices[i].Logprobs) == "null" {
			c.Choices[i].Logprobs = nil
		}
	}
	return c, nil
}

// DecodeResponse decodes a non-streaming completions or chat response body.
// It is DecodeChunk, named for call sites that read a whole response; the
// same guarantees hold.
func DecodeResponse(data []byte) (Chunk, error) { return DecodeChunk(data) }

// decodeObject unmarshals data, which must be a JSON object, into v and maps
// the errors of encoding/json onto this package's sentinels.
func decodeObject(data []byte, v any, what string) error {
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] != '{' && json.Valid(trimmed) {
		return fmt.Errorf("wire: %s: %w: not a JSON object", what, ErrUnexpectedShape)
	}
	err := json.Unmarshal(data, v)
	var syn *json.SyntaxError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &syn):
		return fmt.Errorf("wire: %s: %w at offset %d: %v", what, ErrMalformed, syn.Offset, err)
	}
	return fmt.Errorf("wire: %s: %w: %v", what, ErrUnexpectedShape, err)
}

// OutputBytes returns the number of bytes of output the chunk carries, over
// all choices: completion text, delta or message content, reasoning and tool
// call names and arguments. A chunk with OutputBytes() > 0 carries output in
// the sense of TTFT ("first non-empty output fragment"); role-only,
// finish-only and usage-only chunks carry none.
func (c *Chunk) OutputBytes() int {
	n := 0
	for i := range c.Choices {
		ch := &c.Choices[i]
		n += len(ch.Text)
		if d := ch.Delta; d != nil {
			n += strLen(d.Content) + strLen(d.ReasoningContent) + strLen(d.Reasoning) + toolBytes(d.ToolCalls)
		}
		if m := ch.Message; m != nil {
			n += strLen(m.Content) + strLen(m.ReasoningContent) + strLen(m.Reasoning) + toolBytes(m.ToolCalls)
		}
	}
	return n
}

func strLen(s *string) int {
	if s == nil {
		return 0
	}
	return len(*s)
}

func toolBytes(calls []ToolCall) int {
	n := 0
	for i := range calls {
		n += len(calls[i].Function.Name) + len(calls[i].Function.Arguments)
	}
	return n
}

// UsageOnly reports whether the chunk is a usage-only chunk: no choices, and
// a usage.
func (c *Chunk) UsageOnly() bool {
	return len(c.Choices) == 0 && c.Usage != nil
}

// Finished returns the first non-null finish_reason among the choices.
func (c *Chunk) Finished() (reason string, ok bool) {
	for i := range c.Choices {
		if fr := c.Choices[i].FinishReason; fr != nil {
			return *fr, true
		}
	}
	return "", false
}
