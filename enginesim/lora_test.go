package enginesim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// modelCards returns the id and parent of every card /v1/models lists.
func (e *simEnv) modelCards() []string {
	e.t.Helper()
	status, _, data := e.do(http.MethodGet, "/v1/models", "", nil)
	if status != http.StatusOK {
		e.t.Fatalf("/v1/models: status %d", status)
	}
	var list struct {
		Data []struct {
			ID     string  `json:"id"`
			Root   string  `json:"root"`
			Parent *string `json:"parent"`
		} `json:"data"`
	}
	if err := json.Unmarshal(data, &list); err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, c := range list.Data {
		out = append(out, c.ID+"<"+deref(c.Parent)+"@"+c.Root)
	}
	return out
}

// TestRuntimeLoRA follows vLLM's runtime LoRA routes step by step
// (vllm/entrypoints/serve/lora/api_router.py, entrypoints/openai/models/serving.py):
// what each answers, what /v1/models lists, and which model names requests may use.
func TestRuntimeLoRA(t *testing.T) {
	sim := startSim(t, Config{Flavor: FlavorVLLM})
	complete := `{"model":%q,"prompt":[1,2,3],"max_tokens":2,"ignore_eos":true}`
	steps := []struct {
		name       string
		path, body string
		status     int
		text       string   // in the answer
		cards      []string // /v1/models after the step
		served     []string // model names a completion may use after the step
	}{
		{"load", "/v1/load_lora_adapter", `{"lora_name":"sql","lora_path":"/a/sql"}`, 200,
			"Success: LoRA adapter 'sql' added successfully.",
			[]string{tinyModel + "<@" + tinyModel, "sql<" + tinyModel + "@/a/sql"}, []string{tinyModel, "sql", ""}},
		{"load again", "/v1/load_lora_adapter", `{"lora_name":"sql","lora_path":"/b/sql"}`, 400,
			"has already been loaded", []string{tinyModel + "<@" + tinyModel, "sql<" + tinyModel + "@/a/sql"}, nil},
		{"load in place", "/v1/load_lora_adapter", `{"lora_name":"sql","lora_path":"/b/sql","load_inplace":true}`, 200,
			"added successfully", []string{tinyModel + "<@" + tinyModel, "sql<" + tinyModel + "@/b/sql"}, nil},
		{"load without a path", "/v1/load_lora_adapter", `{"lora_name":"x"}`, 400,
			"Both 'lora_name' and 'lora_path' must be provided.", nil, nil},
		{"load not JSON", "/v1/load_lora_adapter", `{`, 400, "invalid", nil, nil},
		{"unload without a name", "/v1/unload_lora_adapter", `{}`, 400, "needs to be provided", nil, nil},
		{"unload unknown", "/v1/unload_lora_adapter", `{"lora_name":"nope"}`, 404, "cannot be found", nil, nil},
		{"unload", "/v1/unload_lora_adapter", `{"lora_name":"sql"}`, 200,
			"Success: LoRA adapter 'sql' removed successfully.", []string{tinyModel + "<@" + tinyModel}, []string{tinyModel}},
	}
	for _, st := range steps {
		status, _, data := sim.do(http.MethodPost, st.path, st.body, nil)
		if status != st.status || !strings.Contains(string(data), st.text) {
			t.Errorf("%s: %d %s, want %d with %q", st.name, status, data, st.status, st.text)
		}
		if status != http.StatusOK {
			if e := apiError(t, data); e.Code == nil {
				t.Errorf("%s: error without a code: %s", st.name, data)
			}
		}
		if st.cards != nil {
			if got := sim.modelCards(); !slices.Equal(got, st.cards) {
				t.Errorf("%s: /v1/models = %q, want %q", st.name, got, st.cards)
			}
		}
		for _, m := range st.served {
			status, _, data := sim.do(http.MethodPost, "/v1/completions", fmt.Sprintf(complete, m), nil)
			var c struct{ Model string }
			_ = json.Unmarshal(data, &c)
			want := m
			if m == "" {
				want = tinyModel
			}
			if status != http.StatusOK || c.Model != want {
				t.Errorf("%s: completion for %q: %d, model %q: %s", st.name, m, status, c.Model, data)
			}
		}
	}
	if status, _, data := sim.do(http.MethodPost, "/v1/completions", fmt.Sprintf(complete, "sql"), nil); status != http.StatusNotFound {
		t.Errorf("completion for an unloaded adapter: %d %s, want 404", status, data)
	}
}

// TestRuntimeLoRASGLang checks that the SGLang flavor has no vLLM LoRA routes.
func TestRuntimeLoRASGLang(t *testing.T) {
	sim := startSim(t, Config{Flavor: FlavorSGLang})
	if status, _, _ := sim.do(http.MethodPost, "/v1/load_lora_adapter", `{"lora_name":"a","lora_path":"/a"}`, nil); status != http.StatusNotFound {
		t.Errorf("SGLang flavor: load_lora_adapter answered %d, want 404", status)
	}
}
