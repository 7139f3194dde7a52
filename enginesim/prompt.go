package enginesim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/slogate/slogate/wire"
)

// promptBody holds the parts of a request body that carry input text. The engine, unlike
// slogate's inspector, needs the text itself to tokenise it.
type promptBody struct {
	Prompt   json.RawMessage `json:"prompt"`
	Messages []struct {
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	AddGenerationPrompt *bool `json:"add_generation_prompt"`
	// The inputs of the other routes (see tokenizeRoute).
	Input        json.RawMessage `json:"input"`
	Instructions string          `json:"instructions"`
	Text         json.RawMessage `json:"text"`
	InputIDs     json.RawMessage `json:"input_ids"`
}

// contentPart is one element of a chat message's content array.
type contentPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

var errPrompt = errors.New("invalid prompt")

// tokenize returns the prompt's token ids (for /v1/completions or a chat request, by
// route) and reports prompts the simulated engine does not serve.
func (t tokenizer) tokenize(route wire.Route, body []byte) ([]int, error) {
	var b promptBody
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, fmt.Errorf("%w: %v", errPrompt, err)
	}
	switch route {
	case wire.RouteResponses, wire.RouteGenerate, wire.RouteEmbeddings, wire.RoutePooling, wire.RouteClassify:
		return t.tokenizeRoute(route, b)
	}
	if route == wire.RouteChatCompletions || b.Prompt == nil && b.Messages != nil {
		return t.tokenizeChat(b)
	}
	return t.tokenizePrompt(b.Prompt)
}

func (t tokenizer) tokenizePrompt(raw json.RawMessage) ([]int, error) {
	raw = bytes.Trim(raw, jsonSpace)
	if ids, ok := parseIDs(raw); ok {
		return t.checkIDs(ids)
	}
	var text string
	if len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &text) == nil {
		return t.appendIDs(nil, text), nil
	}
	var texts []string
	if json.Unmarshal(raw, &texts) == nil {
		if len(texts) != 1 {
			return nil, fmt.Errorf("%w: the simulator serves one prompt per request, got %d", errPrompt, len(texts))
		}
		return t.appendIDs(nil, texts[0]), nil
	}
	var batch [][]int
	if json.Unmarshal(raw, &batch) != nil {
		return nil, fmt.Errorf("%w: prompt must be a string, a list of strings, or token ids", errPrompt)
	}
	if len(batch) != 1 {
		return nil, fmt.Errorf("%w: the simulator serves one prompt per request, got %d", errPrompt, len(batch))
	}
	return t.checkIDs(batch[0])
}

func (t tokenizer) checkIDs(ids []int) ([]int, error) {
	for _, id := range ids {
		if id < 0 || id >= t.vocab {
			return nil, fmt.Errorf("%w: token id %d is out of vocabulary (size %d)", errPrompt, id, t.vocab)
		}
	}
	return ids, nil
}

// jsonSpace is the whitespace JSON allows between tokens.
const jsonSpace = " \t\r\n"

// parseIDs reads a JSON array of non-negative integers without reflection, for the
// token-id prompts of benchmarks, which reach 256K ids. It reports false for anything
// else (the caller then decodes with encoding/json and reports errors).
func parseIDs(raw []byte) ([]int, bool) {
	if len(raw) < 2 || raw[0] != '[' || raw[len(raw)-1] != ']' {
		return nil, false
	}
	body := bytes.Trim(raw[1:len(raw)-1], jsonSpace)
	if len(body) == 0 {
		return []int{}, true
	}
	ids := make([]int, 0, len(body)/6+1)
	for len(body) > 0 {
		n, i := 0, 0
		for i < len(body) && body[i] >= '0' && body[i] <= '9' {
			n = n*10 + int(body[i]-'0')
			i++
			if n > 1<<31 || i > 10 {
				return nil, false
			}
		}
		if i == 0 || i > 1 && body[0] == '0' {
			return nil, false // not a number, or a leading zero JSON forbids
		}
		ids = append(ids, n)
		body = bytes.TrimLeft(body[i:], jsonSpace)
		if len(body) == 0 {
			break
		}
		if body[0] != ',' {
			return nil, false
		}
		body = bytes.TrimLeft(body[1:], jsonSpace)
		if len(body) == 0 {
			return nil, false // a trailing comma
		}
	}
	return ids, true
}

func (t tokenizer) tokenizeChat(b promptBody) ([]int, error) {
	var ids []int
	for i, m := range b.Messages {
		ids = append(ids, 1, 2, 3) // <|im_start|> role \n
		var text string
		if json.Unmarshal(m.Content, &text) == nil {
			ids = t.appendIDs(ids, text)
		} else if len(m.Content) > 0 && string(m.Content) != "null" {
			var parts []contentPart
			if err := json.Unmarshal(m.Content, &parts); err != nil {
				return nil, fmt.Errorf("%w: messages[%d].content must be a string or a list of parts", errPrompt, i)
			}
			for _, p := range parts {
				if p.Type != "text" && p.Type != "input_text" {
					return nil, fmt.Errorf("%w: this model accepts text only, got a %q part", errPrompt, p.Type)
				}
				ids = t.appendIDs(ids, p.Text)
			}
		}
		ids = append(ids, 4, 5) // <|im_end|> \n
	}
	if b.AddGenerationPrompt == nil || *b.AddGenerationPrompt {
		ids = append(ids, 1, 6, 5) // <|im_start|> assistant \n
	}
	return ids, nil
}

// blockHashes returns chained hashes of the full blocks of ids, so that two prompts share
// a hash exactly when they share every token up to the end of that block.
func blockHashes(ids []int, blockSize int) []uint64 {
	n := len(ids) / blockSize
	out := make([]uint64, n)
	h := uint64(14695981039346656037) // FNV-1a offset basis
	for b := range n {
		for _, id := range ids[b*blockSize : (b+1)*blockSize] {
			h ^= uint64(id)
			h *= 1099511628211
		}
		out[b] = h
	}
	return out
}
