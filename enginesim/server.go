package enginesim

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/slogate/slogate/clock"
	"github.com/slogate/slogate/internal/signal"
	"github.com/slogate/slogate/wire"
)

// Config configures a simulated engine.
type Config struct {
	Profile     Profile
	Flavor      Flavor        // FlavorVLLM (default) or FlavorSGLang
	Faults      Faults        // applied to every request; FaultHeader adds to them
	NotReadyFor time.Duration // /health and inference answer 503 for this long after start
	MaxBodySize int64         // request bodies above this get 413; default 64 MiB
	// Speed runs the model this many times faster than the engine it models: every step
	// and the API latency take 1/Speed of their modelled time, and so do the latencies
	// clients and metrics see. Default 1. For quick runs of long workloads.
	Speed  float64
	Logger *slog.Logger // default: discard
	// Clock measures the start-up delay (NotReadyFor); default clock.Real. The engine's
	// steps keep to the wall clock whatever it is.
	Clock clock.Clock

	// The engine's own admission caps, 0 for off as in the engines (caps.go). They apply
	// to every generation route; a cap of the other flavour is an error.
	//
	// vLLM: MaxNumQueuedReqs (--max-num-queued-reqs) refuses a request when this many
	// are already waiting or running; MaxNumQueuedTokens (--max-num-queued-tokens)
	// refuses one when the prompts of the requests that have produced no token yet add
	// up to this many tokens, each prompt counted whole. Both answer 503.
	MaxNumQueuedReqs   int
	MaxNumQueuedTokens int
	// SGLang: MaxQueuedRequests (--max-queued-requests) refuses a request when this many
	// wait in the scheduler's queue (running ones do not count); 503, or for a streamed
	// request an error event in a 200 stream.
	MaxQueuedRequests int

	// Tracer, when set, traces requests as vLLM does with --otlp-traces-endpoint
	// (trace.go): every generation request the scheduler takes ends with one span,
	// "llm_request", kind server, from its arrival to its finish, the child of the W3C
	// traceparent and tracestate of its HTTP request, with vLLM's attributes. Spans end on
	// the engine's loop under its lock, so the tracer's span processor must not block (an
	// SDK tracer with a batch span processor does not). Nil: no tracing, at no cost.
	Tracer trace.Tracer
}

// Server is a model of an inference engine (vLLM or SGLang) behind their HTTP API: it
// runs no model, but schedules requests through a simulated continuous-batching engine
// (Scheduler) in real time and streams generated text at the pace the model dictates.
// Its Handler is safe for concurrent use; Run drives the engine and must be running for
// requests to make progress.
type Server struct {
	cfg     Config
	tok     tokenizer
	started time.Time
	metrics *simMetrics
	reg     *prometheus.Registry
	mux     *http.ServeMux
	wake    chan struct{}

	lora adapters // loaded at run time (vLLM flavor, lora.go)

	mu      sync.Mutex // guards sched, streams, nextID, asleep and changed; admission caps decide under it
	asleep  bool       // vLLM sleep mode: no steps until wake_up (sleep.go)
	sched   *Scheduler
	streams map[uint64]*stream
	traces  map[uint64]*reqTrace // of the requests the scheduler took; nil without a Tracer (trace.go)
	nextID  uint64
	changed signal.Changed // of the engine's state (Await)
}

// NewServer returns a simulated engine for cfg. It reports an invalid profile or flavour.
func NewServer(cfg Config) (*Server, error) {
	if err := cfg.Profile.Validate(); err != nil {
		return nil, err
	}
	switch cfg.Flavor {
	case "":
		cfg.Flavor = FlavorVLLM
	case FlavorVLLM, FlavorSGLang:
	default:
		return nil, fmt.Errorf("enginesim: unknown flavor %q (want vllm or sglang)", cfg.Flavor)
	}
	if err := cfg.checkCaps(); err != nil {
		return nil, err
	}
	switch {
	case cfg.Speed == 0:
		cfg.Speed = 1
	case !(cfg.Speed > 0) || math.IsInf(cfg.Speed, 0):
		return nil, fmt.Errorf("enginesim: speed %v must be positive", cfg.Speed)
	}
	if cfg.MaxBodySize <= 0 {
		cfg.MaxBodySize = 64 << 20
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.Clock = clock.Or(cfg.Clock)
	cfg.Faults = cfg.Faults.normalized() // a status alone fires always, as in FaultHeader
	s := &Server{
		cfg:     cfg,
		tok:     tokenizer{vocab: cfg.Profile.Vocab},
		started: cfg.Clock.Now(),
		reg:     prometheus.NewRegistry(),
		wake:    make(chan struct{}, 1),
		streams: make(map[uint64]*stream),
	}
	if cfg.Tracer != nil {
		s.traces = make(map[uint64]*reqTrace)
	}
	s.metrics = newSimMetrics(s.reg, cfg.Flavor, cfg.Profile, s.Stats)
	s.sched = NewScheduler(cfg.Profile, s.traceHooks(s.metrics.hooks()))
	s.routes()
	return s, nil
}

func (s *Server) routes() {
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("POST /v1/completions", s.serveGenerate)
	s.mux.HandleFunc("POST /v1/chat/completions", s.serveGenerate)
	s.mux.HandleFunc("GET /v1/models", s.serveModels)
	s.mux.HandleFunc("POST /tokenize", s.serveTokenize)
	s.mux.HandleFunc("GET /health", s.serveHealth)
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	if s.cfg.Flavor == FlavorSGLang {
		s.mux.HandleFunc("GET /server_info", s.serveServerInfo)
		s.mux.HandleFunc("GET /get_server_info", s.serveServerInfo)
		s.mux.HandleFunc("POST /generate", s.serveGenerate)
	} else {
		s.mux.HandleFunc("GET /version", s.serveVersion)
		s.mux.HandleFunc("POST /v1/responses", s.serveGenerate)
	}
	s.mux.HandleFunc("POST /v1/embeddings", s.servePooling)
	s.mux.HandleFunc("POST /v1/rerank", s.servePooling)
	if s.cfg.Flavor == FlavorVLLM { // as with VLLM_ALLOW_RUNTIME_LORA_UPDATING=True
		s.mux.HandleFunc("POST /v1/load_lora_adapter", s.serveLoadLoRA)
		s.mux.HandleFunc("POST /v1/unload_lora_adapter", s.serveUnloadLoRA)
	}
	if s.cfg.Flavor == FlavorVLLM { // as with --enable-sleep-mode, VLLM_SERVER_DEV_MODE=1
		s.mux.HandleFunc("POST /sleep", s.serveSleep)
		s.mux.HandleFunc("POST /wake_up", s.serveWakeUp)
		s.mux.HandleFunc("GET /is_sleeping", s.serveIsSleeping)
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		wire.WriteError(w, http.StatusNotFound, wire.APIError{
			Message: fmt.Sprintf("%s %s is not served by this engine", r.Method, r.URL.Path),
			Type:    wire.TypeEngineNotFound,
		})
	})
}

// Handler returns the HTTP API of the engine.
func (s *Server) Handler() http.Handler { return s.mux }

// Stats returns a snapshot of the engine's scheduler. Safe for concurrent use.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sched.Stats()
}

// Await returns the engine's stats once cond holds for them, checking again after every
// change of the engine's state (a request queued or aborted, a step planned or applied,
// sleep and wake-up); or the last stats and ctx's error once ctx is done. It lets a test
// or a tool wait for the engine without polling. cond is called without the engine's
// lock held.
func (s *Server) Await(ctx context.Context, cond func(Stats) bool) (Stats, error) {
	return signal.Await(ctx, func() (Stats, <-chan struct{}) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.sched.Stats(), s.changed.C()
	}, cond)
}

// Run drives the engine in real time until ctx is done: it plans a step, waits until
// the step's modelled end, applies it and hands the new tokens to the waiting requests.
// Steps end on the modelled timeline of the busy period they belong to, not after a
// sleep each, so that the timer's lateness does not add up over a busy period (at a
// high Speed it would be as long as the steps themselves): a late step makes the next
// ones shorter until the engine is back on time. It returns nil when ctx is done.
func (s *Server) Run(ctx context.Context) error {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var due time.Time // the modelled end of the last step; zero when idle
	for {
		s.mu.Lock()
		d, busy := s.step(time.Now())
		s.changed.Broadcast()
		s.mu.Unlock()
		if !busy {
			due = time.Time{}
			select {
			case <-s.wake:
				continue
			case <-ctx.Done():
				return nil
			}
		}
		if now := time.Now(); due.IsZero() || due.Before(now.Add(-maxBehind)) {
			due = now
		}
		due = due.Add(s.scaled(d))
		timer.Reset(time.Until(due))
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return nil
		}
		s.mu.Lock()
		for _, e := range s.sched.Complete(time.Now()) {
			if st := s.streams[e.ID]; st != nil {
				st.deliver(e)
			}
		}
		s.changed.Broadcast()
		s.mu.Unlock()
	}
}

// maxBehind bounds how far behind its modelled timeline the engine may fall and still
// catch up. Falling behind is common when the simulator runs many times faster than the
// engine on a busy machine, and time not caught up would make the engine faster than
// its model; only a longer stall (a stopped process) is given up as lost, instead of
// being made up in a burst of instant steps.
const maxBehind = time.Second

// scaled returns a modelled duration at the server's speed.
func (s *Server) scaled(d time.Duration) time.Duration {
	return time.Duration(float64(d) / s.cfg.Speed)
}

// ready reports whether the engine has finished its simulated start-up.
func (s *Server) ready() bool { return s.cfg.Clock.Since(s.started) >= s.cfg.NotReadyFor }

func (s *Server) serveHealth(w http.ResponseWriter, _ *http.Request) {
	if !s.ready() {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (s *Server) serveModels(w http.ResponseWriter, _ *http.Request) {
	p := s.cfg.Profile
	card := map[string]any{
		"id": p.Model, "object": "model", "created": time.Now().Unix(), "owned_by": string(s.cfg.Flavor),
		"root": p.Model, "parent": nil, "max_model_len": p.MaxModelLen,
	}
	data := append([]any{card}, s.lora.cards(p.Model)...)
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		wire.WriteError(w, http.StatusInternalServerError, wire.APIError{Message: err.Error()})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// chance reports true with probability p.
func chance(p float64) bool { return p >= 1 || p > 0 && rand.Float64() < p }

// serveTokenize serves POST /tokenize: {"prompt": ...} or {"messages": [...]} in, the
// token ids and their count out, as vLLM and SGLang answer it.
func (s *Server) serveTokenize(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodySize))
	if err != nil {
		wire.WriteError(w, http.StatusRequestEntityTooLarge, *badRequest(err.Error()))
		return
	}
	if !json.Valid(body) {
		wire.WriteError(w, http.StatusBadRequest, *badRequest("request body is not valid JSON"))
		return
	}
	ids, err := s.tok.tokenize(wire.RouteUnknown, body)
	if err != nil {
		wire.WriteError(w, http.StatusBadRequest, *badRequest(err.Error()))
		return
	}
	if ids == nil {
		ids = []int{}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"count": len(ids), "max_model_len": s.cfg.Profile.MaxModelLen, "tokens": ids, "token_strs": nil,
	})
}

// KeepAliveTimeout is how long the engines' API servers keep an idle keep-alive
// connection open: vLLM runs uvicorn with TIMEOUT_KEEP_ALIVE = 5 s
// (vllm/entrypoints/openai/api_server.py), SGLang with timeout_keep_alive=5
// (python/sglang/srt/entrypoints/http_server.py, launch_server). The
// simulator's HTTP servers (slogate sim, the demo) close idle connections after the
// same time, so that a client's connection pool meets engine-closed connections as it
// would in front of a real engine.
const KeepAliveTimeout = 5 * time.Second
