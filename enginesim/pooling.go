package enginesim

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/slogate/slogate/wire"
)

// servePooling serves POST /v1/embeddings and /v1/rerank, which vLLM
// (vllm/entrypoints/pooling/embed/api_router.py, scoring/api_router.py) and SGLang
// (python/sglang/srt/entrypoints/http_server.py) both serve: the input is read and
// tokenised like a prompt, the answer comes after the API latency and one prefill step
// of the input's length, outside the scheduler (a pooling model runs no decode), with
// usage {prompt_tokens, total_tokens}. Faults: status and delay apply.
func (s *Server) servePooling(w http.ResponseWriter, r *http.Request) {
	if !s.ready() {
		wire.WriteError(w, http.StatusServiceUnavailable, wire.APIError{Message: "the engine is starting", Type: wire.TypeEngineInternalServer})
		return
	}
	route := wire.RouteOf(r.URL.Path)
	tokens, status, apiErr := s.poolingInput(r, route)
	if apiErr != nil {
		wire.WriteError(w, status, *apiErr)
		return
	}
	faults, _ := ParseFaults(r.Header.Get(FaultHeader))
	faults = s.cfg.Faults.merge(faults)
	if d := faults.FirstByteDelay; d > 0 && !sleepCtx(r.Context(), d) {
		return
	}
	if faults.Status != 0 && chance(faults.StatusRate) {
		wire.WriteError(w, faults.Status, wire.APIError{Message: "injected fault", Type: wire.TypeEngineInternalServer})
		return
	}
	p := s.cfg.Profile
	prefill := p.Timing.StepTime(StepShape{PrefillTokens: tokens, PrefillAttn: float64(tokens) * float64(tokens-1) / 2})
	if !sleepCtx(r.Context(), s.scaled(p.APILatency+prefill)) {
		return
	}
	created := time.Now().Unix()
	if route == wire.RouteRerank {
		writeJSON(w, http.StatusOK, map[string]any{
			"id": fmt.Sprintf("rerank-%d", created), "model": p.Model,
			"usage":   map[string]int{"prompt_tokens": tokens, "total_tokens": tokens},
			"results": []map[string]any{{"index": 0, "relevance_score": 0.5}},
		})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"id": fmt.Sprintf("embd-%d", created), "object": "list", "created": created, "model": p.Model,
		"data":  []map[string]any{{"index": 0, "object": "embedding", "embedding": []float64{0.25, -0.5, 0.125, 0}}},
		"usage": map[string]int{"prompt_tokens": tokens, "total_tokens": tokens, "completion_tokens": 0},
	})
}

// poolingInput reads and validates a pooling request and returns its input tokens.
func (s *Server) poolingInput(r *http.Request, route wire.Route) (int, int, *wire.APIError) {
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, s.cfg.MaxBodySize))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return 0, http.StatusRequestEntityTooLarge, badRequest(fmt.Sprintf("request body exceeds %d bytes", tooBig.Limit))
		}
		return 0, http.StatusBadRequest, badRequest("reading request body: " + err.Error())
	}
	req, err := wire.Inspect(route, body)
	if err != nil {
		return 0, http.StatusBadRequest, badRequest(err.Error())
	}
	if req.Model != "" && req.Model != s.cfg.Profile.Model {
		return 0, http.StatusNotFound, &wire.APIError{Message: fmt.Sprintf("The model `%s` does not exist.", req.Model), Type: wire.TypeEngineNotFound}
	}
	// Embeddings input is tokenised like a prompt; a rerank's query and documents at
	// four bytes of text a token.
	tokens := req.Prompt.TokenIDs + (req.Prompt.TextBytes+3)/4
	if route == wire.RouteEmbeddings {
		ids, err := s.tok.tokenize(route, body)
		if err != nil {
			return 0, http.StatusBadRequest, badRequest(err.Error())
		}
		tokens = len(ids)
	}
	if tokens == 0 {
		return 0, http.StatusBadRequest, badRequest("the input is empty")
	}
	if tokens > s.cfg.Profile.MaxModelLen {
		return 0, http.StatusBadRequest, badRequest(fmt.Sprintf("This model's maximum context length is %d tokens. However, you requested %d tokens in the input.", s.cfg.Profile.MaxModelLen, tokens))
	}
	return tokens, 0, nil
}
