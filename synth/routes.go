package synth

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/slogate/slogate/wire"
)

// The generation routes a probe can target, by the name workloads give them (the
// `route` of a workload): completions (the default: /v1/completions with token-id
// prompts, exact input lengths), chat (/v1/chat/completions), responses (vLLM's
// /v1/responses) and generate (SGLang's native /generate, token ids in input_ids). Every
// route is measured with the same success rules; only the request body and the stream
// differ.
var probeRoutes = map[string]wire.Route{
	"":            wire.RouteCompletions,
	"completions": wire.RouteCompletions,
	"chat":        wire.RouteChatCompletions,
	"responses":   wire.RouteResponses,
	"generate":    wire.RouteGenerate,
}

// ParseRoute returns the generation route a workload names, or an error for any other
// name.
func ParseRoute(name string) (wire.Route, error) {
	r, ok := probeRoutes[name]
	if !ok {
		return wire.RouteUnknown, fmt.Errorf("route %q: want completions, chat, responses or generate", name)
	}
	return r, nil
}

// routePath is the path of a generation route.
func routePath(r wire.Route) string {
	switch r {
	case wire.RouteChatCompletions:
		return "/v1/chat/completions"
	case wire.RouteResponses:
		return "/v1/responses"
	case wire.RouteGenerate:
		return "/generate"
	}
	return "/v1/completions"
}

// textOnly returns p written as text when the route takes no token ids (chat and
// responses), at one word a token unless PreparePrompts calibrated the rate.
func (p prompt) textOnly() prompt {
	if p.wordsPerToken == 0 {
		p.wordsPerToken = 1
	}
	return p
}

// appendRouteBody appends the streaming request body of p for a route other than
// completions: temperature 0, ignore_eos and the output length as that route names it,
// and, for chat, usage on every chunk.
func (p prompt) appendRouteBody(dst []byte, modelJSON []byte) []byte {
	switch p.route {
	case wire.RouteChatCompletions:
		dst = append(dst, `{"model":`...)
		dst = append(dst, modelJSON...)
		dst = append(dst, `,"messages":[{"role":"user","content":`...)
		dst = p.textOnly().appendText(dst)
		dst = append(dst, `}],"max_tokens":`...)
		dst = strconv.AppendInt(dst, int64(p.output), 10)
		dst = append(dst, `,"temperature":0,"ignore_eos":true,"stream":true,`...)
		return append(dst, `"stream_options":{"include_usage":true,"continuous_usage_stats":true}}`...)
	case wire.RouteResponses:
		dst = append(dst, `{"model":`...)
		dst = append(dst, modelJSON...)
		dst = append(dst, `,"input":`...)
		dst = p.textOnly().appendText(dst)
		dst = append(dst, `,"max_output_tokens":`...)
		dst = strconv.AppendInt(dst, int64(p.output), 10)
		return append(dst, `,"temperature":0,"ignore_eos":true,"stream":true}`...)
	}
	// SGLang's /generate: no model field; the limits live in sampling_params.
	if p.wordsPerToken > 0 {
		dst = append(dst, `{"text":`...)
		dst = p.appendText(dst)
	} else {
		dst = append(dst, `{"input_ids":`...)
		dst = p.appendIDs(dst)
	}
	dst = append(dst, `,"sampling_params":{"max_new_tokens":`...)
	dst = strconv.AppendInt(dst, int64(p.output), 10)
	return append(dst, `,"temperature":0,"ignore_eos":true},"stream":true}`...)
}

// eventText is what the prober reads of one event besides the measurement: its output
// text, and the completion tokens counted so far when the event says.
type eventText struct {
	text    string
	replace bool // text is the whole answer so far (SGLang's /generate)
	tokens  int
	counted bool
}

// readEvent decodes the text and running token count of an event of route.
func readEvent(route wire.Route, data []byte) (eventText, bool) {
	switch route {
	case wire.RouteResponses:
		var ev struct {
			Type     string
			Delta    json.RawMessage
			Response struct {
				Usage *struct {
					OutputTokens int `json:"output_tokens"`
				}
			}
		}
		if json.Unmarshal(data, &ev) != nil {
			return eventText{}, false
		}
		var out eventText
		if ev.Type == "response.output_text.delta" {
			_ = json.Unmarshal(ev.Delta, &out.text)
		}
		if u := ev.Response.Usage; u != nil {
			out.tokens, out.counted = u.OutputTokens, true
		}
		return out, true
	case wire.RouteGenerate:
		var ev struct {
			Text     string
			MetaInfo struct {
				CompletionTokens *int `json:"completion_tokens"`
			} `json:"meta_info"`
		}
		if json.Unmarshal(data, &ev) != nil {
			return eventText{}, false
		}
		out := eventText{text: ev.Text, replace: true}
		if n := ev.MetaInfo.CompletionTokens; n != nil {
			out.tokens, out.counted = *n, true
		}
		return out, true
	}
	c, err := wire.DecodeChunk(data)
	if err != nil {
		return eventText{}, false
	}
	var out eventText
	for _, ch := range c.Choices {
		out.text += ch.Text
		if ch.Delta != nil && ch.Delta.Content != nil {
			out.text += *ch.Delta.Content
		}
	}
	if c.Usage != nil {
		out.tokens, out.counted = c.Usage.CompletionTokens, true
	}
	return out, true
}
