package enginesim

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/slogate/slogate/wire"
)

// tokenizeRoute returns the input tokens of a body sent to a route beyond completions
// and chat:
//
//   - /v1/responses: "input" is a string (one user message) or a list of input items,
//     each rendered as a chat message (vLLM, responses/utils.py,
//     construct_input_messages, with "instructions" as the system message);
//   - /generate: "input_ids" as given, else "text" as a raw prompt without a chat
//     template (SGLang, io_struct.py, GenerateReqInput);
//   - /v1/embeddings, /pooling, /classify: "input" as a prompt, or "messages".
func (t tokenizer) tokenizeRoute(route wire.Route, b promptBody) ([]int, error) {
	switch route {
	case wire.RouteResponses:
		return t.tokenizeResponses(b)
	case wire.RouteGenerate:
		if len(b.InputIDs) > 0 && string(b.InputIDs) != "null" {
			return t.tokenizePrompt(b.InputIDs)
		}
		return t.tokenizePrompt(b.Text)
	}
	if b.Input == nil && b.Messages != nil {
		return t.tokenizeChat(b)
	}
	return t.tokenizePrompt(b.Input)
}

func (t tokenizer) tokenizeResponses(b promptBody) ([]int, error) {
	chat := promptBody{AddGenerationPrompt: b.AddGenerationPrompt}
	if b.Instructions != "" {
		instr, _ := json.Marshal(b.Instructions)
		chat.Messages = append(chat.Messages, struct {
			Content json.RawMessage `json:"content"`
		}{instr})
	}
	input := bytes.Trim(b.Input, jsonSpace)
	var text string
	switch {
	case len(input) > 0 && input[0] == '"' && json.Unmarshal(input, &text) == nil:
		chat.Messages = append(chat.Messages, struct {
			Content json.RawMessage `json:"content"`
		}{input})
	default:
		var items []struct {
			Content json.RawMessage `json:"content"`
		}
		if err := json.Unmarshal(input, &items); err != nil {
			return nil, fmt.Errorf("%w: input must be a string or a list of input items", errPrompt)
		}
		chat.Messages = append(chat.Messages, items...)
	}
	return t.tokenizeChat(chat)
}
