package sidecar

import (
	"fmt"
	"sync"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/engine"
	"github.com/slogate/slogate/schedule"
)

// arbiter decides when background work — a scheduled probe, a calibration — may drive
// the engine: one piece at a time, and only while live traffic leaves room. Each kind of
// work asks through a guard of its own (guard), which the schedule package calls
// before (Claim) and during (Busy) every run and releases at its end.
type arbiter struct {
	// live reports whether live traffic needs the engine; engineState says whether the
	// engine's own saturation counts (see Sidecar.liveBusy).
	live func(engineState bool) (bool, string)

	mu     sync.Mutex
	holder string // the work that drives the engine now; "" when none
}

// guard returns the guard of one kind of work. A kind that saturates the engine itself
// (a calibration drives it past its knee) counts the engine's saturation only before it
// starts; once it runs, live traffic's own signals stop it.
func (a *arbiter) guard(kind string, saturatesEngine bool) schedule.Exclusive {
	return &workGuard{a: a, kind: kind, saturates: saturatesEngine}
}

// workGuard is one kind of work's view of the arbiter.
type workGuard struct {
	a         *arbiter
	kind      string
	saturates bool
}

// Claim implements schedule.Exclusive: the engine becomes this work's unless other work
// holds it or live traffic needs it.
func (g *workGuard) Claim() (bool, string) {
	g.a.mu.Lock()
	defer g.a.mu.Unlock()
	if h := g.a.holder; h != "" && h != g.kind {
		return true, "a " + h + " is running"
	}
	if busy, why := g.a.live(true); busy {
		return true, why
	}
	g.a.holder = g.kind
	return false, ""
}

// Busy implements schedule.Guard: while the work runs, it stops when live traffic needs
// the engine.
func (g *workGuard) Busy() (bool, string) {
	g.a.mu.Lock()
	held := g.a.holder == g.kind
	other := g.a.holder
	g.a.mu.Unlock()
	if other != "" && !held {
		return true, "a " + other + " is running"
	}
	return g.a.live(!(held && g.saturates))
}

// Release implements schedule.Exclusive.
func (g *workGuard) Release() {
	g.a.mu.Lock()
	defer g.a.mu.Unlock()
	if g.a.holder == g.kind {
		g.a.holder = ""
	}
}

// liveBusy reports whether live traffic needs the engine: when it holds more than
// Config.ProbeMaxLoad of the KV cache, when a tier's p95 TTFT (from dispatch, as
// admission's feedback last saw it) is over its SLO, or (with engineState) when
// admission sees the engine saturated or down.
func (s *Sidecar) liveBusy(engineState bool) (bool, string) {
	snap := s.scraper.Latest()
	if _, kv := s.admission.LiveInFlight(); engine.Known(snap.KVCapacityTokens) && snap.KVCapacityTokens > 0 {
		if share := float64(kv) / snap.KVCapacityTokens; share > s.cfg.ProbeMaxLoad {
			return true, fmt.Sprintf("live requests hold %.0f%% of the KV cache", 100*share)
		}
	}
	st := s.admission.Stats()
	if engineState && st.Engine != admission.NoReason {
		return true, "the engine is " + st.Engine.String()
	}
	for _, t := range st.Tiers {
		if !t.SLO.MetTTFT(t.P95TTFT) {
			return true, fmt.Sprintf("tier %s: p95 TTFT %s over its SLO %s", t.Name, t.P95TTFT, t.SLO.TTFT)
		}
	}
	return false, ""
}
