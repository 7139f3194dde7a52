package enginesim

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// sleepStates returns the engine_sleep_state gauges as awake/weights_offloaded/discard_all.
func (e *simEnv) sleepStates() string {
	fams := e.scrape()
	var out []string
	for _, s := range []string{"awake", "weights_offloaded", "discard_all"} {
		v := metricValue(e.t, fams, "vllm:engine_sleep_state", map[string]string{"sleep_state": s})
		out = append(out, fmt.Sprint(v))
	}
	return strings.Join(out, "/")
}

func (e *simEnv) isSleeping() string {
	e.t.Helper()
	status, _, body := e.do(http.MethodGet, "/is_sleeping", "", nil)
	if status != http.StatusOK {
		e.t.Fatalf("/is_sleeping: %d %s", status, body)
	}
	return strings.TrimSpace(string(body))
}

// TestSleepLevels checks the routes' answers and the gauges at each sleep level, as
// vLLM's record_sleep_state sets them (vllm/v1/metrics/loggers.py).
func TestSleepLevels(t *testing.T) {
	sim := startSim(t, Config{Flavor: FlavorVLLM})
	steps := []struct {
		method, path string
		status       int
		gauges       string
		sleeping     string
	}{
		{"", "", 0, "1/0/0", `{"is_sleeping":false}`},
		{http.MethodPost, "/sleep", 200, "0/1/0", `{"is_sleeping":true}`}, // level 1 by default
		{http.MethodPost, "/wake_up", 200, "1/0/0", `{"is_sleeping":false}`},
		{http.MethodPost, "/sleep?level=2", 200, "0/0/1", `{"is_sleeping":true}`},
		{http.MethodPost, "/wake_up?tags=weights&tags=kv_cache", 200, "1/0/0", `{"is_sleeping":false}`},
		{http.MethodPost, "/sleep?level=0&mode=keep", 200, "0/0/0", `{"is_sleeping":true}`},
		{http.MethodPost, "/wake_up", 200, "1/0/0", `{"is_sleeping":false}`},
		{http.MethodPost, "/sleep?level=x", 500, "1/0/0", `{"is_sleeping":false}`},
		{http.MethodPost, "/sleep?mode=later", 500, "1/0/0", `{"is_sleeping":false}`},
	}
	for _, st := range steps {
		if st.path != "" {
			if status, _, body := sim.do(st.method, st.path, "", nil); status != st.status {
				t.Errorf("%s %s: %d %s, want %d", st.method, st.path, status, body, st.status)
			}
		}
		if got := sim.sleepStates(); got != st.gauges {
			t.Errorf("after %q: awake/weights_offloaded/discard_all = %s, want %s", st.path, got, st.gauges)
		}
		if got := sim.isSleeping(); got != st.sleeping {
			t.Errorf("after %q: /is_sleeping = %s, want %s", st.path, got, st.sleeping)
		}
	}
	sgl := startSim(t, Config{Flavor: FlavorSGLang})
	if status, _, _ := sgl.do(http.MethodPost, "/sleep", "", nil); status != http.StatusNotFound {
		t.Errorf("SGLang flavor: /sleep answered %d, want 404", status)
	}
}

// TestSleepRequests checks what happens to requests: one in flight when the engine
// falls asleep (mode abort) ends with finish reason "abort"; one sent while it sleeps
// is accepted and waits, and is served once the engine wakes up.
func TestSleepRequests(t *testing.T) {
	p := tinyProfile(t, func(p *Profile) { p.Timing = Timing{StepBase: 0.005} })
	sim := startSim(t, Config{Flavor: FlavorVLLM, Profile: p})
	ended := make(chan rawStream, 1)
	go func() {
		ended <- sim.stream(context.Background(), "/v1/completions", `{"prompt":[1,2,3],"max_tokens":2000,"ignore_eos":true,"stream":true}`, nil, nil)
	}()
	sim.await("the stream to run", func() (bool, string) {
		st := sim.srv.Stats()
		return st.Running == 1 && st.GenerationTokens > 0, fmt.Sprintf("%+v", st)
	})
	if status, _, _ := sim.do(http.MethodPost, "/sleep?level=1", "", nil); status != 200 {
		t.Fatalf("/sleep: %d", status)
	}
	r := <-ended
	last := r.chunks[len(r.chunks)-1]
	if !r.done || r.err != nil || len(last.Choices) != 1 || deref(last.Choices[0].FinishReason) != "abort" {
		t.Errorf("stream in flight at sleep: done %v, err %v, last chunk %+v; want finish reason abort, then [DONE]", r.done, r.err, last)
	}

	answered := make(chan int, 1)
	go func() {
		status, _, _ := sim.do(http.MethodPost, "/v1/completions", `{"prompt":[1,2,3],"max_tokens":3,"ignore_eos":true}`, nil)
		answered <- status
	}()
	sim.await("the request to wait", func() (bool, string) {
		st := sim.srv.Stats()
		return st.Waiting == 1, fmt.Sprintf("%+v", st)
	})
	select {
	case status := <-answered:
		t.Fatalf("answered %d while asleep", status)
	default:
	}
	if status, _, _ := sim.do(http.MethodPost, "/wake_up", "", nil); status != 200 {
		t.Fatalf("/wake_up: %d", status)
	}
	if status := <-answered; status != http.StatusOK {
		t.Errorf("after wake_up: %d, want 200", status)
	}
}
