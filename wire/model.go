package wire

import "encoding/json"

// ResponseModel returns the model an engine's answer names: the top-level "model" of an
// OpenAI chunk or response (vLLM and SGLang put the served model name there), or the
// "model" of the response object a Responses API event carries ("response"). It returns
// "" when data names none — SGLang's /generate answers do not — or is not a JSON
// object. Meant for one event or body per request (a span's gen_ai.response.model), not
// the per-chunk path: it decodes with encoding/json. Safe for concurrent use.
func ResponseModel(data []byte) string {
	// Maps rather than a struct: encoding/json matches struct fields case-insensitively,
	// and the engines' keys are matched exactly, as everywhere in wire.
	var top map[string]json.RawMessage
	if json.Unmarshal(data, &top) != nil {
		return ""
	}
	if m := modelOf(top); m != "" {
		return m
	}
	var resp map[string]json.RawMessage
	if raw, ok := top["response"]; !ok || json.Unmarshal(raw, &resp) != nil {
		return ""
	}
	return modelOf(resp)
}

// modelOf returns obj's "model" when it is a string.
func modelOf(obj map[string]json.RawMessage) string {
	var m string
	if raw, ok := obj["model"]; !ok || json.Unmarshal(raw, &m) != nil {
		return ""
	}
	return m
}
