package enginesim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/slogate/slogate/wire"
)

// job is one admitted generation request, as the handler serves it.
type job struct {
	req     wire.Request
	arrival time.Time
	model   string
	hashes  []uint64
	script  []string // the scripted answer's pieces, if any (script.go)
	id      uint64
	seed    uint64
	created int64
	prompt  int
	output  int
	reason  string
	faults  Faults
	trace   *reqTrace // nil unless the server traces (trace.go)
}

// serveGenerate serves POST /v1/completions, /v1/chat/completions, /v1/responses
// (vLLM flavor) and /generate (SGLang flavor).
func (s *Server) serveGenerate(w http.ResponseWriter, r *http.Request) {
	arrival := time.Now()
	if !s.ready() {
		wire.WriteError(w, http.StatusServiceUnavailable, wire.APIError{Message: "the engine is starting", Type: wire.TypeEngineInternalServer})
		return
	}
	j, status, apiErr := s.admitJob(r)
	if apiErr != nil {
		wire.WriteError(w, status, *apiErr)
		return
	}
	if d := j.faults.FirstByteDelay; d > 0 && !sleepCtx(r.Context(), d) {
		return
	}
	if j.faults.Status != 0 && chance(j.faults.StatusRate) {
		wire.WriteError(w, j.faults.Status, wire.APIError{Message: "injected fault", Type: wire.TypeEngineInternalServer})
		return
	}
	j.arrival = arrival
	if hit := s.preflight(); hit != capNone {
		s.refuse(w, j, hit)
		return
	}
	if !sleepCtx(r.Context(), s.scaled(s.cfg.Profile.APILatency)) {
		return
	}
	st, hit := s.submit(j)
	if hit != capNone {
		s.refuse(w, j, hit)
		return
	}
	defer s.release(j.id)
	if j.req.Stream {
		s.streamJob(w, r, j, st)
		return
	}
	s.answerJob(w, r, j, st)
}

// admitJob reads and validates a generation request. On failure it returns the status
// and the error to send.
func (s *Server) admitJob(r *http.Request) (*job, int, *wire.APIError) {
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, s.cfg.MaxBodySize))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, http.StatusRequestEntityTooLarge, badRequest(fmt.Sprintf("request body exceeds %d bytes", tooBig.Limit))
		}
		return nil, http.StatusBadRequest, badRequest("reading request body: " + err.Error())
	}
	route := wire.RouteOf(r.URL.Path)
	req, err := wire.Inspect(route, body)
	if err != nil {
		return nil, http.StatusBadRequest, badRequest(err.Error())
	}
	served, known := s.servedModel(req.Model) // the base model or a LoRA adapter (lora.go)
	switch {
	case !known:
		model := "model"
		return nil, http.StatusNotFound, &wire.APIError{Message: fmt.Sprintf("The model `%s` does not exist.", req.Model), Type: wire.TypeEngineNotFound, Param: &model}
	case req.N != 1:
		return nil, http.StatusBadRequest, badRequest("the simulator serves n=1 only")
	case (req.IncludeUsage || req.ContinuousUsage) && !req.Stream:
		return nil, http.StatusBadRequest, badRequest("Stream options can only be defined when `stream=True`.")
	}
	faults, err := ParseFaults(r.Header.Get(FaultHeader))
	if err != nil {
		return nil, http.StatusBadRequest, badRequest(err.Error())
	}
	ids, err := s.tok.tokenize(route, body)
	if err != nil {
		return nil, http.StatusBadRequest, badRequest(err.Error())
	}
	if s.cfg.Flavor == FlavorVLLM {
		// vLLM honours continuous_usage_stats only together with include_usage
		// (vllm/entrypoints/serve/utils/api_utils.py, should_include_usage); SGLang
		// honours it alone (python/sglang/srt/entrypoints/openai/utils.py).
		req.ContinuousUsage = req.ContinuousUsage && req.IncludeUsage
	}
	j := &job{req: req, model: served, prompt: len(ids), faults: s.cfg.Faults.merge(faults), created: time.Now().Unix()}
	if route == wire.RouteChatCompletions {
		var tools bool
		if j.script, tools = s.tok.script(body); tools {
			return nil, http.StatusBadRequest, badRequest("the simulated engine has no tool parser; requests with tools are not served")
		}
	}
	if apiErr := s.fitContext(j); apiErr != nil {
		return nil, http.StatusBadRequest, apiErr
	}
	if p := s.cfg.Profile; p.PrefixCaching {
		j.hashes = blockHashes(ids, p.BlockSize)
	}
	if s.cfg.Tracer != nil {
		j.trace = newReqTrace(r.Header, body, j)
	}
	return j, 0, nil
}

// fitContext checks the request against the context window and decides how many tokens
// the answer has: max_tokens with ignore_eos, else a length of its own up to max_tokens.
func (s *Server) fitContext(j *job) *wire.APIError {
	maxLen := s.cfg.Profile.MaxModelLen
	if j.prompt == 0 {
		return badRequest("the prompt is empty")
	}
	maxTokens := j.req.MaxTokens
	switch {
	case j.req.HasMaxTokens:
	case j.req.Route == wire.RouteCompletions:
		maxTokens = 16 // the legacy completions default, as vLLM applies it
	case j.req.Route == wire.RouteGenerate:
		maxTokens = 128 // SGLang's default max_new_tokens (sampling_params.py)
	default:
		maxTokens = maxLen - j.prompt
	}
	if j.prompt >= maxLen || j.prompt+maxTokens > maxLen {
		return badRequest(fmt.Sprintf("You passed %d input tokens and requested %d output tokens. However, the model's context length is only %d tokens, resulting in a maximum input length of %d tokens. Please reduce the length of the input prompt.", j.prompt, maxTokens, maxLen, max(maxLen-maxTokens, 0)))
	}
	if maxTokens == 0 {
		return badRequest("max_tokens must be at least 1")
	}
	j.req.MaxTokens = maxTokens
	return nil
}

func badRequest(msg string) *wire.APIError {
	return &wire.APIError{Message: msg, Type: wire.TypeEngineBadRequest}
}

// submit registers j's stream and queues it in the scheduler, unless an admission cap
// refuses it, which it reports; the check and the queueing are one step under s.mu.
func (s *Server) submit(j *job) (*stream, capHit) {
	st := newStream()
	s.mu.Lock()
	s.nextID++
	j.id = s.nextID
	j.seed = j.id * 0x2545f4914f6cdd1d
	if hit := s.overCap(); hit != capNone {
		s.mu.Unlock()
		return nil, hit
	}
	j.output, j.reason = j.req.MaxTokens, "length"
	if !j.req.IgnoreEOS {
		// Without ignore_eos the answer ends where the model would stop: after its
		// scripted answer, or after 16-511 tokens.
		natural := 16 + int(j.seed>>40)%496
		if j.script != nil {
			natural = len(j.script)
		}
		if natural < j.output {
			j.output, j.reason = natural, "stop"
		}
	}
	s.streams[j.id] = st
	now := time.Now()
	s.sched.Submit(now, Request{
		ID: j.id, PromptTokens: j.prompt, OutputTokens: j.output, FinishReason: j.reason,
		MaxTokens: j.req.MaxTokens, BlockHashes: j.hashes, Arrival: j.arrival,
	})
	s.traceSubmit(j)
	s.changed.Broadcast()
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return st, capNone
}

// release forgets j's stream and aborts it in the scheduler if it is still there, which
// frees its batch slot and KV blocks as a real engine does when its client goes away.
func (s *Server) release(id uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.streams, id)
	s.sched.Abort(time.Now(), id)
	s.traceRelease(id)
	s.changed.Broadcast()
}

// sleepCtx waits for d, reporting false if ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
