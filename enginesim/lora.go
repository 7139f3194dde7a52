package enginesim

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/slogate/slogate/wire"
)

// adapters are the LoRA adapters loaded at run time, as vLLM keeps them when started
// with VLLM_ALLOW_RUNTIME_LORA_UPDATING=True (vllm/entrypoints/serve/lora/api_router.py,
// vllm/entrypoints/openai/models/serving.py, OpenAIServingModels). The simulator loads
// no weights: an adapter is a name that requests may use and /v1/models lists, and it
// serves as its base model does. Safe for concurrent use.
type adapters struct {
	mu    sync.Mutex
	names []string          // in load order, as /v1/models lists them
	paths map[string]string // lora_path by lora_name
}

// has reports whether name is a loaded adapter.
func (a *adapters) has(name string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.paths[name]
	return ok
}

// cards returns the /v1/models cards of the adapters, as show_available_models builds
// them: id the adapter's name, root its path, parent the base model.
func (a *adapters) cards(base string) []any {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]any, 0, len(a.names))
	for _, n := range a.names {
		out = append(out, map[string]any{
			"id": n, "object": "model", "created": time.Now().Unix(), "owned_by": "vllm",
			"root": a.paths[n], "parent": base, "max_model_len": nil,
		})
	}
	return out
}

// loraRequest is the body of /v1/load_lora_adapter and /v1/unload_lora_adapter
// (vllm/entrypoints/serve/lora/protocol.py).
type loraRequest struct {
	Name        string `json:"lora_name"`
	Path        string `json:"lora_path"`
	LoadInplace bool   `json:"load_inplace"`
}

// serveLoadLoRA serves POST /v1/load_lora_adapter as vLLM does: 400 without both a
// name and a path, or for a name already loaded unless load_inplace; else the adapter
// is loaded and the answer is vLLM's plain-text success message.
func (s *Server) serveLoadLoRA(w http.ResponseWriter, r *http.Request) {
	req, ok := s.readLoRARequest(w, r)
	if !ok {
		return
	}
	if req.Name == "" || req.Path == "" {
		loraError(w, http.StatusBadRequest, "InvalidUserInput", "Both 'lora_name' and 'lora_path' must be provided.")
		return
	}
	a := &s.lora
	a.mu.Lock()
	defer a.mu.Unlock()
	_, loaded := a.paths[req.Name]
	if loaded && !req.LoadInplace {
		loraError(w, http.StatusBadRequest, "InvalidUserInput", fmt.Sprintf("The lora adapter '%s' has already been loaded. If you want to load the adapter in place, set 'load_inplace' to True.", req.Name))
		return
	}
	if a.paths == nil {
		a.paths = map[string]string{}
	}
	if !loaded {
		a.names = append(a.names, req.Name)
	}
	a.paths[req.Name] = req.Path
	w.WriteHeader(http.StatusOK)
	_, _ = fmt.Fprintf(w, "Success: LoRA adapter '%s' added successfully.", req.Name)
}

// serveUnloadLoRA serves POST /v1/unload_lora_adapter: 400 without a name, 404 for an
// adapter not loaded, else the adapter is gone from /v1/models and from what requests
// may name.
func (s *Server) serveUnloadLoRA(w http.ResponseWriter, r *http.Request) {
	req, ok := s.readLoRARequest(w, r)
	if !ok {
		return
	}
	if req.Name == "" {
		loraError(w, http.StatusBadRequest, "InvalidUserInput", "'lora_name' needs to be provided to unload a LoRA adapter.")
		return
	}
	a := &s.lora
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, loaded := a.paths[req.Name]; !loaded {
		loraError(w, http.StatusNotFound, wire.TypeEngineNotFound, fmt.Sprintf("The lora adapter '%s' cannot be found.", req.Name))
		return
	}
	delete(a.paths, req.Name)
	a.names = slices.DeleteFunc(a.names, func(n string) bool { return n == req.Name })
	w.WriteHeader(http.StatusOK)
	_, _ = fmt.Fprintf(w, "Success: LoRA adapter '%s' removed successfully.", req.Name)
}

// readLoRARequest decodes a LoRA request body; on failure it has answered 400.
func (s *Server) readLoRARequest(w http.ResponseWriter, r *http.Request) (loraRequest, bool) {
	var req loraRequest
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		wire.WriteError(w, http.StatusBadRequest, *badRequest("invalid LoRA adapter request: " + err.Error()))
		return req, false
	}
	return req, true
}

func loraError(w http.ResponseWriter, status int, typ, msg string) {
	wire.WriteError(w, status, wire.APIError{Message: msg, Type: typ})
}

// servedModel returns the model name a request is served under: the base model for ""
// or its own name, a loaded adapter's name; ok false for any other name.
func (s *Server) servedModel(name string) (string, bool) {
	switch {
	case name == "" || name == s.cfg.Profile.Model:
		return s.cfg.Profile.Model, true
	case s.cfg.Flavor == FlavorVLLM && s.lora.has(name):
		return name, true
	}
	return "", false
}
