package main

import "strconv"

// answer is one request's output: n tokens of tokenText, in vLLM's completions shape
// (the shape of wire.Chunk's encoding; pacer_test.go holds it to that).
type answer struct {
	n      int    // tokens to send
	sent   int    // tokens sent so far
	prompt int    // prompt tokens, estimated at four bytes each
	head   []byte // the chunk envelope up to the opening of "choices"
}

// appendToken appends the event carrying one token; the last one has finish reason
// "length".
func (a *answer) appendToken(dst []byte, last bool) []byte {
	dst = append(dst, "data: "...)
	dst = append(dst, a.head...)
	dst = append(dst, `{"index":0,"text":`...)
	dst = strconv.AppendQuote(dst, tokenText)
	dst = append(dst, `,"logprobs":null,"finish_reason":`...)
	if last {
		dst = append(dst, `"length"`...)
	} else {
		dst = append(dst, "null"...)
	}
	return append(dst, `,"stop_reason":null}],"usage":null}`+"\n\n"...)
}

// appendUsage appends the usage-only event that ends a stream whose client asked for
// usage.
func (a *answer) appendUsage(dst []byte) []byte {
	dst = append(dst, "data: "...)
	dst = append(dst, a.head...)
	dst = append(dst, `],"usage":`...)
	dst = a.appendUsageObject(dst)
	return append(dst, "}\n\n"...)
}

func (a *answer) appendUsageObject(dst []byte) []byte {
	dst = append(dst, `{"prompt_tokens":`...)
	dst = strconv.AppendInt(dst, int64(a.prompt), 10)
	dst = append(dst, `,"total_tokens":`...)
	dst = strconv.AppendInt(dst, int64(a.prompt+a.sent), 10)
	dst = append(dst, `,"completion_tokens":`...)
	dst = strconv.AppendInt(dst, int64(a.sent), 10)
	return append(dst, '}')
}

// response is the whole non-streaming answer, all n tokens at once.
func (a *answer) response() []byte {
	a.sent = a.n
	dst := append([]byte(nil), a.head...)
	dst = append(dst, `{"index":0,"text":`...)
	text := make([]byte, 0, a.n*len(tokenText))
	for range a.n {
		text = append(text, tokenText...)
	}
	dst = strconv.AppendQuote(dst, string(text))
	dst = append(dst, `,"logprobs":null,"finish_reason":"length","stop_reason":null}],"usage":`...)
	dst = a.appendUsageObject(dst)
	return append(dst, '}')
}
