package enginesim

import (
	"strconv"
)

// The per-token chunk is the simulator's hot path: thousands of streams each write one
// per engine step. appendTokenChunk writes it by hand, byte for byte what encoding the
// equivalent wire.Chunk would give (encode_test.go holds it to that), at a fraction of
// the cost of reflection.

// chunkHead returns the JSON envelope of a's chunks up to the opening of "choices".
func (a *answer) chunkHead() []byte {
	object, id := "text_completion", "cmpl-"+a.j.hexID()
	if a.chat {
		object, id = "chat.completion.chunk", "chatcmpl-"+a.j.hexID()
	}
	b := append([]byte(nil), `{"id":`...)
	b = appendJSONString(b, id)
	b = append(b, `,"object":`...)
	b = appendJSONString(b, object)
	b = append(b, `,"created":`...)
	b = strconv.AppendInt(b, a.j.created, 10)
	b = append(b, `,"model":`...)
	b = appendJSONString(b, a.j.model)
	return append(b, `,"choices":[`...)
}

// appendTokenChunk appends the event "data: {chunk}\n\n" carrying text as completion
// text, chat content or chat reasoning, with finish reason and usage when given.
func (a *answer) appendTokenChunk(dst []byte, text string, reasoning bool, finish string, usage bool) []byte {
	if a.head == nil {
		a.head = a.chunkHead()
	}
	dst = append(dst, "data: "...)
	dst = append(dst, a.head...)
	dst = append(dst, `{"index":0,`...)
	switch {
	case !a.chat:
		dst = append(dst, `"text":`...)
	case reasoning:
		dst = append(dst, `"delta":{"reasoning_content":`...)
	default:
		dst = append(dst, `"delta":{"content":`...)
	}
	dst = appendJSONString(dst, text)
	if a.chat {
		dst = append(dst, '}')
	}
	dst = append(dst, `,"logprobs":null,"finish_reason":`...)
	if finish == "" {
		dst = append(dst, "null"...)
	} else {
		dst = appendJSONString(dst, finish)
	}
	if !a.chat || finish != "" {
		dst = append(dst, `,"stop_reason":null`...)
	}
	dst = append(dst, `}],"usage":`...)
	if usage {
		dst = append(dst, `{"prompt_tokens":`...)
		dst = strconv.AppendInt(dst, int64(a.j.prompt), 10)
		dst = append(dst, `,"total_tokens":`...)
		dst = strconv.AppendInt(dst, int64(a.j.prompt+a.sent), 10)
		dst = append(dst, `,"completion_tokens":`...)
		dst = strconv.AppendInt(dst, int64(a.sent), 10)
		dst = append(dst, '}')
	} else {
		dst = append(dst, "null"...)
	}
	return append(dst, "}\n\n"...)
}

// appendJSONString appends s as a JSON string, escaping what JSON requires and nothing
// more (as Python's json and encoding/json with SetEscapeHTML(false) do).
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
