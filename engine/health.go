package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// ErrUnhealthy reports an engine whose GET /health answered with an error status: its
// HTTP server is up (it answered /metrics) but the engine behind it is not serving.
var ErrUnhealthy = errors.New("engine: /health reports the engine unhealthy")

// healthEvery is how often the scraper asks /health. Current SGLang runs a one-token
// generation for it when idle (python/sglang/srt/entrypoints/http_server.py,
// health_generate, unless SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=false), so it is not
// asked on every scrape.
const healthEvery = 5 * time.Second

// health is the last answer of /health and when it came.
type health struct {
	at  time.Time // zero until asked
	err error     // nil when healthy
}

// checkHealth returns why the engine is not healthy, from its GET /health, asked at most
// once per healthEvery on the scraper's clock (in between, the last answer holds; a
// failure is asked again on the next scrape).
//
// Both engines answer 200 when they serve and an error status when they do not: vLLM
// when its engine core has died (check_health raises EngineDeadError,
// vllm/v1/engine/async_llm.py); SGLang while it starts, shuts down, or its one-token
// generation fails (http_server.py, health_generate: 503). An engine without the
// endpoint (404 or 405) is taken as healthy, since its /metrics answered. A transport
// error is an error: /metrics answered a moment ago, so the engine is in trouble.
// The caller holds s.mu.
func (s *Scraper) checkHealth(ctx context.Context) error {
	now := s.clock.Now()
	if !s.health.at.IsZero() && s.health.err == nil && now.Sub(s.health.at) < healthEvery {
		return nil
	}
	s.health = health{at: now, err: s.askHealth(ctx)}
	return s.health.err
}

func (s *Scraper) askHealth(ctx context.Context) error {
	resp, err := s.send(ctx, "/health", "*/*")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	switch {
	case resp.StatusCode/100 == 2, resp.StatusCode == http.StatusNotFound, resp.StatusCode == http.StatusMethodNotAllowed:
		return nil
	}
	return fmt.Errorf("%w: GET /health: %s", ErrUnhealthy, resp.Status)
}
