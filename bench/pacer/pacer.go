package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/slogate/slogate/wire"
)

// kvCapacity is the KV cache the pacer claims, in tokens (16-token blocks).
const (
	blockSize   = 16
	numBlocks   = 65536
	kvCapacity  = blockSize * numBlocks
	tokenText   = " token"
	maxBodySize = 64 << 20
)

// pacer streams completions at a fixed pace, each request on its own timer. Safe for
// concurrent use.
type pacer struct {
	model  string
	first  time.Duration
	every  time.Duration
	tokens int

	ids     atomic.Int64
	running atomic.Int64
	kv      atomic.Int64 // prompt + output tokens held by running requests
}

func newPacer(model string, first, every time.Duration, tokens int) *pacer {
	return &pacer{model: model, first: first, every: every, tokens: tokens}
}

func (p *pacer) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/completions", p.complete)
	mux.HandleFunc("GET /v1/models", p.models)
	mux.HandleFunc("GET /metrics", p.metrics)
	mux.HandleFunc("GET /health", func(http.ResponseWriter, *http.Request) {})
	return mux
}

// complete answers one completions request: streamed at the pace, or, without "stream",
// in one body once the last token is due.
func (p *pacer) complete(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodySize))
	if err != nil {
		wire.WriteError(w, http.StatusBadRequest, wire.APIError{Message: err.Error()})
		return
	}
	req, err := wire.Inspect(wire.RouteCompletions, body)
	if err != nil {
		wire.WriteError(w, http.StatusBadRequest, wire.APIError{Message: err.Error()})
		return
	}
	a := p.answer(req)
	p.running.Add(1)
	p.kv.Add(int64(a.prompt))
	defer func() {
		p.running.Add(-1)
		p.kv.Add(-int64(a.prompt + a.sent))
	}()
	if !req.Stream {
		if !sleepUntil(r, start.Add(p.due(a.n-1))) {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(a.response())
		return
	}
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	p.stream(w, rc, r, a, start, req.IncludeUsage)
}

// stream writes a's tokens, each when it is due, then the usage chunk if asked and
// [DONE]. It stops when the client goes away.
func (p *pacer) stream(w io.Writer, rc *http.ResponseController, r *http.Request, a *answer, start time.Time, usage bool) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	buf := make([]byte, 0, 512)
	for k := range a.n {
		t.Reset(time.Until(start.Add(p.due(k))))
		select {
		case <-r.Context().Done():
			return
		case <-t.C:
		}
		a.sent++
		p.kv.Add(1)
		buf = a.appendToken(buf[:0], k == a.n-1)
		if _, err := w.Write(buf); err != nil || rc.Flush() != nil {
			return
		}
	}
	if usage {
		buf = a.appendUsage(buf[:0])
	} else {
		buf = buf[:0]
	}
	buf = append(buf, "data: [DONE]\n\n"...)
	_, _ = w.Write(buf)
}

// due is when token k (from 0) is due, counted from the request's arrival.
func (p *pacer) due(k int) time.Duration { return p.first + time.Duration(k)*p.every }

func sleepUntil(r *http.Request, t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-r.Context().Done():
		return false
	case <-timer.C:
		return true
	}
}

func (p *pacer) answer(req wire.Request) *answer {
	n := p.tokens
	if req.HasMaxTokens && req.MaxTokens > 0 {
		n = req.MaxTokens
	}
	model := req.Model
	if model == "" {
		model = p.model
	}
	a := &answer{n: n, prompt: req.Prompt.TokenIDs + (req.Prompt.TextBytes+3)/4}
	name, _ := json.Marshal(model)
	a.head = fmt.Appendf(nil, `{"id":"cmpl-%016x","object":"text_completion","created":%d,"model":%s,"choices":[`,
		p.ids.Add(1), time.Now().Unix(), name)
	return a
}

// models answers GET /v1/models as vLLM does, with the one served model.
func (p *pacer) models(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"object":"list","data":[{"id":%s,"object":"model","created":%d,"owned_by":"vllm","root":%[1]s,"parent":null,"max_model_len":32768}]}`,
		strconv.Quote(p.model), time.Now().Unix())
}

// metrics answers GET /metrics with a minimal vLLM exposition.
func (p *pacer) metrics(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	labels := fmt.Sprintf(`engine="0",model_name=%s`, strconv.Quote(p.model))
	gauge := func(name, help string, v float64) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %[1]s gauge\n%[1]s{%[3]s} %[4]s\n", name, help, labels, strconv.FormatFloat(v, 'g', -1, 64))
	}
	gauge("vllm:num_requests_running", "Number of requests in model execution batches.", float64(p.running.Load()))
	gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", 0)
	gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", float64(p.kv.Load())/kvCapacity)
	fmt.Fprintf(w, "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n# TYPE vllm:cache_config_info gauge\n"+
		"vllm:cache_config_info{block_size=\"%d\",engine=\"0\",num_gpu_blocks=\"%d\"} 1.0\n", blockSize, numBlocks)
}
