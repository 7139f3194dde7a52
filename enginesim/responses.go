package enginesim

import "strconv"

// The Responses API as vLLM serves it (vllm/entrypoints/openai/responses/api_router.py,
// _convert_stream_to_sse_events: `event: <type>` and `data: <model_dump_json>`, no
// [DONE]; serving.py, responses_stream_generator and responses_full_generator;
// protocol.py, ResponsesResponse and ResponseUsage).

// respOutput is a message output item of a response.
type respOutput struct {
	ID      string        `json:"id"`
	Content []respContent `json:"content"`
	Role    string        `json:"role"`
	Status  string        `json:"status"`
	Type    string        `json:"type"`
}

type respContent struct {
	Annotations []any  `json:"annotations"`
	Text        string `json:"text"`
	Type        string `json:"type"`
	Logprobs    any    `json:"logprobs"`
}

type respUsage struct {
	InputTokens        int            `json:"input_tokens"`
	InputTokensDetails map[string]int `json:"input_tokens_details"`
	OutputTokens       int            `json:"output_tokens"`
	OutputDetails      map[string]int `json:"output_tokens_details"`
	TotalTokens        int            `json:"total_tokens"`
}

// respObject is vLLM's ResponsesResponse, in its field order, with the fields slogate
// and clients read.
type respObject struct {
	ID                string       `json:"id"`
	CreatedAt         int64        `json:"created_at"`
	IncompleteDetails any          `json:"incomplete_details"`
	Model             string       `json:"model"`
	Object            string       `json:"object"`
	Output            []respOutput `json:"output"`
	MaxOutputTokens   int          `json:"max_output_tokens"`
	Status            string       `json:"status"`
	Usage             *respUsage   `json:"usage"`
}

func (a *answer) respID() string { return "resp_" + a.j.hexID() }
func (a *answer) msgID() string  { return "msg_" + a.j.hexID() }

// response returns the response object: in progress, or complete with the text so far
// and usage (status incomplete when max_output_tokens cut it, as vLLM reports it).
func (a *answer) response(complete bool) respObject {
	r := respObject{ID: a.respID(), CreatedAt: a.j.created, Model: a.j.model, Object: "response",
		Output: []respOutput{}, MaxOutputTokens: a.j.req.MaxTokens, Status: "in_progress"}
	if !complete {
		return r
	}
	r.Status = "completed"
	if a.j.reason == "length" {
		r.Status, r.IncompleteDetails = "incomplete", map[string]string{"reason": "max_output_tokens"}
	}
	r.Output = []respOutput{{ID: a.msgID(), Role: "assistant", Status: "completed", Type: "message",
		Content: []respContent{{Annotations: []any{}, Text: string(a.j.appendText(nil, 0, a.sent)), Type: "output_text"}}}}
	r.Usage = &respUsage{InputTokens: a.j.prompt, InputTokensDetails: map[string]int{"cached_tokens": 0},
		OutputTokens: a.sent, OutputDetails: map[string]int{"reasoning_tokens": 0}, TotalTokens: a.j.prompt + a.sent}
	return r
}

// respEvent appends one typed event: `event: <type>` and its JSON with the sequence
// number and the type last, as pydantic orders openai-python's event fields.
func (a *answer) respEvent(typ string, fields map[string]any) {
	fields["sequence_number"] = a.seq
	fields["type"] = typ
	a.seq++
	a.buf = append(a.buf, "event: "...)
	a.buf = append(a.buf, typ...)
	a.buf = append(a.buf, "\ndata: "...)
	a.buf = appendJSON(a.buf, fields) // map keys sort, which puts type after sequence_number
	a.buf = append(a.buf, '\n')
}

func (a *answer) responsesOpen() {
	r := a.response(false)
	a.respEvent("response.created", map[string]any{"response": r})
	a.respEvent("response.in_progress", map[string]any{"response": r})
	item := respOutput{ID: a.msgID(), Content: []respContent{}, Role: "assistant", Status: "in_progress", Type: "message"}
	a.respEvent("response.output_item.added", map[string]any{"item": item, "output_index": 0})
	a.respEvent("response.content_part.added", map[string]any{"content_index": 0, "item_id": a.msgID(), "output_index": 0,
		"part": respContent{Annotations: []any{}, Type: "output_text", Logprobs: []any{}}})
}

// responsesDelta renders k tokens as one response.output_text.delta, written by hand:
// it is the per-token hot path.
func (a *answer) responsesDelta(k int) {
	a.text = a.j.appendText(a.text[:0], a.sent, a.sent+k)
	a.sent += k
	const typ = "response.output_text.delta"
	a.buf = append(a.buf, "event: "+typ+"\ndata: {\"content_index\":0,\"delta\":"...)
	a.buf = appendJSONString(a.buf, string(a.text))
	a.buf = append(a.buf, `,"item_id":`...)
	a.buf = appendJSONString(a.buf, a.msgID())
	a.buf = append(a.buf, `,"logprobs":[],"output_index":0,"sequence_number":`...)
	a.buf = strconv.AppendInt(a.buf, int64(a.seq), 10)
	a.buf = append(a.buf, `,"type":"`+typ+"\"}\n\n"...)
	a.seq++
}

// responsesEnd renders the done events of the text and response.completed, which ends
// the stream.
func (a *answer) responsesEnd() {
	r := a.response(true)
	text := r.Output[0].Content[0].Text
	a.respEvent("response.output_text.done", map[string]any{"content_index": 0, "item_id": a.msgID(), "logprobs": []any{}, "output_index": 0, "text": text})
	a.respEvent("response.content_part.done", map[string]any{"content_index": 0, "item_id": a.msgID(), "output_index": 0, "part": r.Output[0].Content[0]})
	a.respEvent("response.output_item.done", map[string]any{"item": r.Output[0], "output_index": 0})
	a.respEvent("response.completed", map[string]any{"response": r})
}
