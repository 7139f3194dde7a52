package enginesim

import (
	"strconv"
	"time"
)

// SGLang's native /generate (python/sglang/srt/entrypoints/http_server.py,
// generate_request: `data: ` + JSON + `\n\n` per event, then `data: [DONE]`;
// managers/tokenizer_manager.py, _handle_batch_output): every event carries the whole
// text so far, the output ids so far and meta_info with running token counts; the last
// one a finish_reason object and e2e_latency.

// generateEvent renders the next k tokens as one event.
func (a *answer) generateEvent(k int, last bool) {
	a.sent += k
	finish := ""
	if last {
		finish = a.j.reason
	}
	a.buf = append(a.buf, "data: "...)
	a.buf = a.appendGenerate(a.buf, finish, "")
	a.buf = append(a.buf, "\n\n"...)
}

// generateAbort renders the event of a request the scheduler aborted.
func (a *answer) generateAbort() {
	a.buf = append(a.buf, "data: "...)
	a.buf = a.appendGenerate(a.buf, "abort", generationFailed)
	a.buf = append(a.buf, "\n\n"...)
}

// appendGenerate appends the answer so far as SGLang writes it (orjson: compact), with
// the finish reason when it has one.
func (a *answer) appendGenerate(dst []byte, finish, message string) []byte {
	dst = append(dst, `{"text":`...)
	dst = appendJSONString(dst, string(a.j.appendText(a.text[:0], 0, a.sent)))
	dst = append(dst, `,"output_ids":[`...)
	for i := range a.sent {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(dst, int64(specialTokens+int(a.j.seed>>8+uint64(i))%30000), 10)
	}
	dst = append(dst, `],"meta_info":{"id":"`...)
	dst = append(dst, a.j.hexID()...)
	dst = append(dst, `","finish_reason":`...)
	switch finish {
	case "":
		dst = append(dst, "null"...)
	case "length":
		dst = append(dst, `{"type":"length","length":`...)
		dst = strconv.AppendInt(dst, int64(a.sent), 10)
		dst = append(dst, '}')
	case "abort":
		dst = append(dst, `{"type":"abort","message":`...)
		dst = appendJSONString(dst, message)
		dst = append(dst, `,"status_code":500,"err_type":"InternalServerError"}`...)
	default:
		dst = append(dst, `{"type":"stop","matched":151645}`...)
	}
	dst = append(dst, `,"prompt_tokens":`...)
	dst = strconv.AppendInt(dst, int64(a.j.prompt), 10)
	dst = append(dst, `,"weight_version":"default","completion_tokens":`...)
	dst = strconv.AppendInt(dst, int64(a.sent), 10)
	dst = append(dst, `,"cached_tokens":0`...)
	if finish != "" {
		dst = append(dst, `,"e2e_latency":`...)
		dst = strconv.AppendFloat(dst, time.Since(a.j.arrival).Seconds(), 'f', 6, 64)
	}
	return append(dst, "}}"...)
}

// generateBody is the non-streaming answer: the same object, finished.
func (a *answer) generateBody(finished bool) rawJSON {
	reason := ""
	if finished {
		reason = a.j.reason
	}
	return rawJSON(a.appendGenerate(nil, reason, ""))
}

// rawJSON is JSON already encoded.
type rawJSON []byte

// MarshalJSON returns the bytes as they are.
func (r rawJSON) MarshalJSON() ([]byte, error) { return r, nil }
