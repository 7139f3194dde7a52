package enginesim

import (
	"fmt"
	"time"
)

// Virtual is an engine of one profile in virtual time, driven from outside: the caller
// hands it each request as it arrives (Arrive) and moves its time on (Advance) to
// whatever happens next, the end of the engine's step in progress included (Next). It
// lets a harness put something in front of the engine, slogate's admission on a fake
// clock, and play minutes of load in milliseconds, the same on every run.
//
// Its requests behave as the HTTP server's do (Server): they enter the scheduler
// APILatency after they arrive, and the engine's admission caps of its Config refuse them
// as that server does: vLLM's checked on arrival and again as the request is handed to
// the engine, SGLang's as it joins the waiting queue (caps.go). Every request generates
// exactly the output it asks for, as with ignore_eos. Not safe for concurrent use.
type Virtual struct {
	cfg     Config
	s       *Scheduler
	now     time.Time
	stepEnd time.Time // end of the step in progress; zero when none
	nextID  uint64
	pending []Request // arrived, not yet in the scheduler; in order of arrival
	ev      Events    // what happened since the last Advance returned
}

// Events is what happened to a Virtual's requests as its time moved on, each list in
// the order it happened.
type Events struct {
	First    []uint64   // requests whose first output token came: their prefill finished
	Finished []Finished // requests that left the engine
	Refused  []uint64   // requests the caps refused as they entered the scheduler
}

// NewVirtual returns an idle engine of cfg.Profile, with cfg's flavour and admission
// caps, whose virtual time starts at start. The HTTP server's other settings (speed,
// faults, body limits) do not apply.
func NewVirtual(cfg Config, start time.Time) (*Virtual, error) {
	if err := cfg.Profile.Validate(); err != nil {
		return nil, err
	}
	if cfg.Flavor == "" {
		cfg.Flavor = FlavorVLLM
	}
	if err := cfg.checkCaps(); err != nil {
		return nil, err
	}
	v := &Virtual{cfg: cfg, now: start}
	v.s = NewScheduler(cfg.Profile, Hooks{Finished: func(f Finished) { v.ev.Finished = append(v.ev.Finished, f) }})
	return v, nil
}

// Now returns the engine's virtual time.
func (v *Virtual) Now() time.Time { return v.now }

// Arrive hands the engine a request of prompt input tokens that generates output tokens,
// arriving now. It returns the request's ID, by which Advance reports it, and false when
// vLLM's caps refuse it on arrival (the 503 of caps.go); a request can still be refused
// as it enters the scheduler, which Advance reports.
func (v *Virtual) Arrive(prompt, output int) (uint64, bool, error) {
	if err := checkShape(v.cfg.Profile, prompt, output); err != nil {
		return 0, false, err
	}
	v.nextID++
	if v.cfg.Flavor == FlavorVLLM && v.cfg.overCap(v.s) != capNone {
		return v.nextID, false, nil
	}
	v.pending = append(v.pending, Request{
		ID: v.nextID, PromptTokens: prompt, OutputTokens: output, MaxTokens: output,
		FinishReason: "length", Arrival: v.now,
	})
	return v.nextID, true, nil
}

// Next returns when the engine's state next changes without a new arrival: the end of
// its step in progress, or the entry into the scheduler of the first request still in
// the API server. It reports false when the engine is idle with nothing to come.
func (v *Virtual) Next() (time.Time, bool) {
	next, ok := v.stepEnd, !v.stepEnd.IsZero()
	if len(v.pending) > 0 {
		if entry := v.pending[0].Arrival.Add(v.cfg.Profile.APILatency); !ok || entry.Before(next) {
			next, ok = entry, true
		}
	}
	return next, ok
}

// Advance moves the engine's time on to t, which must not pass Next, and returns what
// happened by then: the requests due by t enter the scheduler (or are refused), the step
// ending at t completes, and the next one starts. A request's first token and its end
// can come in the same step.
func (v *Virtual) Advance(t time.Time) (Events, error) {
	if next, ok := v.Next(); t.Before(v.now) || ok && t.After(next) {
		return Events{}, fmt.Errorf("enginesim: advancing from %v to %v past the next change at %v", v.now, t, next)
	}
	v.now = t
	for len(v.pending) > 0 && !v.pending[0].Arrival.Add(v.cfg.Profile.APILatency).After(t) {
		r := v.pending[0]
		v.pending = v.pending[1:]
		if v.cfg.overCap(v.s) != capNone {
			v.ev.Refused = append(v.ev.Refused, r.ID)
			continue
		}
		v.s.Submit(r.Arrival.Add(v.cfg.Profile.APILatency), r)
	}
	if !v.stepEnd.IsZero() && !t.Before(v.stepEnd) {
		for _, e := range v.s.Complete(v.stepEnd) {
			if e.First {
				v.ev.First = append(v.ev.First, e.ID)
			}
		}
		v.stepEnd = time.Time{}
	}
	if v.stepEnd.IsZero() {
		if d, ok := v.s.Step(t); ok {
			v.stepEnd = t.Add(d)
		}
	}
	ev := v.ev
	v.ev = Events{}
	return ev, nil
}

// Load is the engine's state as its metrics would show it now: requests running and
// waiting, and the share of the KV cache in use.
func (v *Virtual) Load() (running, waiting int, kv float64) {
	st := v.s.Stats()
	return st.Running, st.Waiting, kvUsage(st, v.cfg.Profile, nil)
}
