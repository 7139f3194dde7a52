package wire

import (
	"encoding/json"
	"strings"
)

// Content is a request's or an answer's text in the form the GenAI semantic conventions
// give gen_ai.input.messages and gen_ai.output.messages: messages of a role, each a list
// of parts; slogate writes only text parts. It is for the spans of a user who opted in
// to recording content, and decodes with encoding/json: then OutputText reads every
// event of every answer.
type Content struct {
	Role         string `json:"role"`
	Parts        []Part `json:"parts"`
	FinishReason string `json:"finish_reason,omitempty"`
}

// Part is one part of a message: here always {"type": "text", "content": ...}.
type Part struct {
	Type    string `json:"type"`
	Content string `json:"content"`
}

// textPart returns a text part.
func textPart(s string) Part { return Part{Type: "text", Content: s} }

// InputContent returns the text of a request to route, as messages: a chat request's
// messages (their string content, or the text of their text parts), a completion's
// prompt (a string or a list of strings, as user messages), a Responses request's input
// (a string, or its messages' text), /generate's text. A request it cannot read, and
// any other route, has none.
func InputContent(route Route, body []byte) []Content {
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Prompt json.RawMessage `json:"prompt"`
		Input  json.RawMessage `json:"input"`
		Text   json.RawMessage `json:"text"`
	}
	if json.Unmarshal(body, &req) != nil {
		return nil
	}
	var out []Content
	switch route {
	case RouteChatCompletions:
		for _, m := range req.Messages {
			out = append(out, Content{Role: m.Role, Parts: textParts(m.Content)})
		}
	case RouteCompletions:
		out = userText(req.Prompt)
	case RouteGenerate:
		out = userText(req.Text)
	case RouteResponses:
		var items []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(req.Input, &items) == nil {
			for _, m := range items {
				if m.Role != "" {
					out = append(out, Content{Role: m.Role, Parts: textParts(m.Content)})
				}
			}
			return out
		}
		out = userText(req.Input)
	}
	return out
}

// userText returns a prompt of one string or a list of strings as user messages.
func userText(raw json.RawMessage) []Content {
	if absent(raw) {
		return nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []Content{{Role: "user", Parts: []Part{textPart(one)}}}
	}
	var many []string
	if json.Unmarshal(raw, &many) != nil {
		return nil
	}
	out := make([]Content, len(many))
	for i, s := range many {
		out[i] = Content{Role: "user", Parts: []Part{textPart(s)}}
	}
	return out
}

// absent reports whether a member is missing or null (which encoding/json would decode
// into a string as "").
func absent(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }

// textParts returns a message content's text: a string, or the text of each part of a
// list whose parts carry "text" (OpenAI's text and input_text parts).
func textParts(raw json.RawMessage) []Part {
	if absent(raw) {
		return nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []Part{textPart(one)}
	}
	var parts []struct {
		Text *string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return nil
	}
	var out []Part
	for _, p := range parts {
		if p.Text != nil {
			out = append(out, textPart(*p.Text))
		}
	}
	return out
}

// OutputText returns the text one event of an answer to route carries (or a whole
// non-streaming body), and whether it is the answer so far rather than an increment
// (SGLang's /generate stream repeats the whole text in every event). It reads the first
// choice's content, text or message content, a Responses delta of output text or a
// response object's output text, /generate's text; data it cannot read carries none.
// Of a request for several choices (n), it reads the first (index 0).
func OutputText(route Route, data []byte) (text string, cumulative bool) {
	switch route {
	case RouteGenerate:
		var ev struct {
			Text string `json:"text"`
		}
		_ = json.Unmarshal(data, &ev)
		return ev.Text, true
	case RouteResponses:
		var ev struct {
			Type   string `json:"type"`
			Delta  string `json:"delta"`
			Output []struct {
				Content []struct {
					Type string `json:"type"`
					Text string `json:"text"`
				} `json:"content"`
			} `json:"output"`
		}
		if json.Unmarshal(data, &ev) != nil {
			return "", false
		}
		if strings.HasSuffix(ev.Type, "output_text.delta") {
			return ev.Delta, false
		}
		var b strings.Builder
		for _, o := range ev.Output {
			for _, c := range o.Content {
				if c.Type == "output_text" {
					b.WriteString(c.Text)
				}
			}
		}
		return b.String(), false
	}
	c, err := DecodeChunk(data)
	if err != nil {
		return "", false
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 { // with n > 1, each choice streams in chunks of its own
			continue
		}
		switch {
		case ch.Delta != nil && ch.Delta.Content != nil:
			return *ch.Delta.Content, false
		case ch.Message != nil && ch.Message.Content != nil:
			return *ch.Message.Content, false
		}
		return ch.Text, false
	}
	return "", false
}
