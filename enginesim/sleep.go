package enginesim

import (
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// Sleep mode of the vLLM flavor, as vLLM serves it with --enable-sleep-mode and
// VLLM_SERVER_DEV_MODE=1 (vllm/entrypoints/serve/dev/sleep/api_router.py): POST
// /sleep?level=N&mode=M, POST /wake_up, GET /is_sleeping. Sleeping pauses the
// scheduler as vLLM's EngineCore.sleep does (pause_scheduler, vllm/v1/engine/core.py):
// mode "abort" (the default) aborts the requests in flight, "keep" holds them; new
// requests are accepted and wait until the engine wakes. The engine_sleep_state gauges
// follow PrometheusStatLogger.record_sleep_state (vllm/v1/metrics/loggers.py): awake 0
// while asleep, weights_offloaded 1 at level 1, discard_all 1 at level 2. The
// simulator frees no memory; "wait" mode (sleep once the requests in flight are done)
// is served as "keep", and wake_up's tags are accepted but any wake_up wakes it all.

// sleepGauge holds the sleep state the metrics export: 0 awake, else the level + 1.
type sleepGauge struct{ v atomic.Int32 }

func (g *sleepGauge) set(asleep bool, level int) {
	v := int32(0)
	if asleep {
		v = int32(level) + 1
	}
	g.v.Store(v)
}

// state returns whether the engine sleeps and at which level.
func (g *sleepGauge) state() (bool, int) {
	v := int(g.v.Load())
	return v > 0, v - 1
}

// sleepValue returns the engine_sleep_state gauge of label value state.
func sleepValue(state string) func(Stats, Profile, *simMetrics) float64 {
	return func(_ Stats, _ Profile, m *simMetrics) float64 {
		asleep, level := m.sleep.state()
		on := false
		switch state {
		case "awake":
			on = !asleep
		case "weights_offloaded":
			on = asleep && level == 1
		case "discard_all":
			on = asleep && level == 2
		}
		if on {
			return 1
		}
		return 0
	}
}

// serveSleep serves POST /sleep. A level that is not a number and an unknown mode fail
// as vLLM's int() and pause_scheduler do, with a 500.
func (s *Server) serveSleep(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	level, err := strconv.Atoi(orDefaultString(q.Get("level"), "1"))
	mode := orDefaultString(q.Get("mode"), "abort")
	if err != nil || mode != "abort" && mode != "keep" && mode != "wait" {
		http.Error(w, fmt.Sprintf("invalid sleep level %q or mode %q", q.Get("level"), mode), http.StatusInternalServerError)
		return
	}
	s.mu.Lock()
	s.asleep = true
	s.metrics.sleep.set(true, level)
	if mode == "abort" {
		now := time.Now()
		for id, st := range s.streams {
			if s.sched.Abort(now, id) {
				st.deliver(Emission{ID: id, Done: true, Reason: "abort"})
			}
		}
	}
	s.changed.Broadcast()
	s.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// serveWakeUp serves POST /wake_up: the engine serves again, the requests that waited
// first.
func (s *Server) serveWakeUp(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	s.asleep = false
	s.metrics.sleep.set(false, 0)
	s.changed.Broadcast()
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	w.WriteHeader(http.StatusOK)
}

// serveIsSleeping serves GET /is_sleeping: {"is_sleeping": bool}.
func (s *Server) serveIsSleeping(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	asleep := s.asleep
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]bool{"is_sleeping": asleep})
}

// step plans the engine's next step, or none while it sleeps; s.mu is held.
func (s *Server) step(now time.Time) (time.Duration, bool) {
	if s.asleep {
		return 0, false
	}
	return s.sched.Step(now)
}

func orDefaultString(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
