package main

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/clock"
	"github.com/slogate/slogate/engine"
	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/wire"
)

// Virtual time: an experiment's arrivals played against each configuration with the
// engine model (enginesim.Virtual) and slogate's admission (admission.Controller, the
// same code the sidecar runs) on one fake clock, jumping from one event to the next. It
// measures what real time cannot afford: workloads whose requests run for minutes (the
// seven-shape mix, with 8,192-token outputs), at every load level, the same on every
// run. What it leaves out is the HTTP path: the proxy, the client and the engine's
// server, which the real-time phases keep (docs/benchmarks.md says where the two
// agree).
//
// The sidecar's loops run on the fake clock as they do in real time: admission's Tick
// every admissionTick, the engine's metrics scraped every setup.Scrape (the sidecar's
// --scrape-interval by default). An admitted request reaches the engine the moment its
// ticket is issued; slogate's own path adds nothing, and a request still running when
// the run ends is cut, as the real-time phases cut it.

// admissionTick is how often the sidecar runs admission's Tick (sidecar.Run).
const admissionTick = 20 * time.Millisecond

// virtualEpoch is when a virtual run starts.
var virtualEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// playVirtual plays e's arrivals, over Warmup+Window+Grace, against every setup in
// virtual time, one after another, and records the outcomes as the real-time phases do
// (e.Outcomes by setup, then by arrival). e.Stacks carries the setups, without servers.
func (e *experiment) playVirtual(p enginesim.Profile, sus []setup) error {
	total := e.Warmup + e.Window + e.Grace
	e.Arrivals = schedule(e.Classes, total, e.Seed, e.cv())
	e.Outcomes = make([][]outcome, len(sus))
	e.Timeline = make([][]sample, len(sus))
	for k, su := range sus {
		e.Stacks = append(e.Stacks, &stack{setup: su, profile: p})
		out, err := playOne(su, p, e.Classes, e.Arrivals, total)
		if err != nil {
			return fmt.Errorf("%s, %s: %w", e.Name, su.Name, err)
		}
		e.Outcomes[k] = out
	}
	return nil
}

// flight is a request admitted and sent to the engine in a virtual run.
type flight struct {
	i      int // its arrival
	tk     *admission.Ticket
	queued time.Duration // its wait in slogate's queue
}

// verdict of one Admit, run on a goroutine of its own.
type admitted struct {
	i   int
	tk  *admission.Ticket
	err error
}

// virtualRun is one setup's run in virtual time.
type virtualRun struct {
	su       setup
	p        enginesim.Profile
	classes  []class
	arrivals []arrival
	clk      *clock.Fake
	eng      *enginesim.Virtual
	src      *scrapedEngine
	ctl      *admission.Controller // nil with admission off
	out      []outcome
	byID     map[uint64]*flight
	verdicts chan admitted
	waiting  int             // Admit calls that have not returned
	ctx      context.Context // the Admit calls'; cancelled when the run ends
}

// playOne plays arrivals against one setup and returns their outcomes.
func playOne(su setup, p enginesim.Profile, classes []class, arrivals []arrival, total time.Duration) ([]outcome, error) {
	eng, err := enginesim.NewVirtual(su.Caps.apply(enginesim.Config{Profile: p, Flavor: su.Flavor}), virtualEpoch)
	if err != nil {
		return nil, err
	}
	r := &virtualRun{
		su: su, p: p, classes: classes, arrivals: arrivals, clk: clock.NewFake(virtualEpoch), eng: eng,
		src: &scrapedEngine{}, out: make([]outcome, len(arrivals)), byID: map[uint64]*flight{},
		verdicts: make(chan admitted, 64),
	}
	cfg, _ := sidecarFor(su, "")
	if su.Admission != nil {
		if r.ctl, err = admission.New(*su.Admission, admission.Options{
			Mode: admission.Enforce, SLO: su.SLO, Engine: r.src, Clock: r.clk,
			Saturation: admission.Saturation{QueueDepth: cfg.SaturationQueue, KVUsage: cfg.SaturationKV, StaleAfter: cfg.StaleAfter},
		}); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.ctx = ctx
	scrape := cfg.ScrapeInterval
	end := virtualEpoch.Add(total)
	nextTick, nextScrape, next := virtualEpoch, virtualEpoch, 0
	for {
		t := end
		if next < len(arrivals) {
			t = earliest(t, virtualEpoch.Add(arrivals[next].At))
		}
		if r.ctl != nil {
			t = earliest(t, nextTick, nextScrape)
		}
		if at, ok := r.eng.Next(); ok {
			t = earliest(t, at)
		}
		if !t.Before(end) {
			break
		}
		r.clk.SetTime(t)
		if err := r.advance(t); err != nil {
			return nil, err
		}
		if r.ctl != nil && !t.Before(nextScrape) {
			r.src.set(r.scrape(t))
			nextScrape = t.Add(scrape)
		}
		if r.ctl != nil && !t.Before(nextTick) {
			r.ctl.Tick()
			r.settle(t)
			nextTick = t.Add(admissionTick)
		}
		for next < len(arrivals) && !virtualEpoch.Add(arrivals[next].At).After(t) {
			r.arrive(next, t)
			next++
		}
	}
	r.clk.SetTime(end)
	r.cut(end, cancel)
	return r.out, nil
}

// scrape returns the engine's state at t as the sidecar's scraper reads it from the
// engine's metrics: vLLM's waiting requests all wait for capacity (reason="capacity",
// as the simulator reports them); SGLang says no reason.
func (r *virtualRun) scrape(t time.Time) engine.Snapshot {
	running, waiting, kv := r.eng.Load()
	snap := engine.Snapshot{
		Kind: engine.KindVLLM, Up: true, At: t, Running: float64(running), Waiting: float64(waiting),
		WaitingCapacity: float64(waiting), KVUsage: kv, KVCapacityTokens: float64(r.p.KVCapacity()),
	}
	if r.su.Flavor == enginesim.FlavorSGLang {
		snap.Kind, snap.WaitingCapacity = engine.KindSGLang, math.NaN()
	}
	return snap
}

// advance moves the engine to t and hands admission what happened: first tokens, as the
// proxy reports a stream's first output chunk (Ticket.Output), then what finished or was
// refused.
func (r *virtualRun) advance(t time.Time) error {
	ev, err := r.eng.Advance(t)
	if err != nil {
		return err
	}
	for _, id := range ev.First {
		if f := r.byID[id]; f.tk != nil {
			f.tk.Output(1)
		}
	}
	for _, id := range ev.Refused {
		f := r.byID[id]
		delete(r.byID, id)
		r.refuse(f, t)
	}
	for _, fin := range ev.Finished {
		f := r.byID[fin.ID]
		delete(r.byID, fin.ID)
		r.finish(f, fin, t)
	}
	if r.ctl != nil && len(ev.Finished)+len(ev.Refused) > 0 {
		r.settle(t)
	}
	return nil
}

// arrive decides arrival i at t: admitted at once (sent to the engine), rejected at
// once, or queued until a later event grants or rejects it.
func (r *virtualRun) arrive(i int, t time.Time) {
	o := &r.out[i]
	o.Arrival, o.Class = r.arrivals[i].At, r.arrivals[i].Class
	if r.ctl == nil {
		r.send(&flight{i: i}, t)
		return
	}
	c := r.classes[o.Class]
	req := admission.Request{Prompt: wire.PromptSize{TokenIDs: c.Input, Prompts: 1}, Class: admission.Interactive, Output: c.Output, Stream: true}
	r.waiting++
	go func() {
		tk, err := r.ctl.Admit(r.ctx, req)
		r.verdicts <- admitted{i: i, tk: tk, err: err}
	}()
	r.settle(t)
}

// settle waits until every Admit call has returned or is waiting in admission's queue,
// and acts on those that returned: the engine gets the admitted, the client the
// rejections. Only this goroutine moves the clock or ends tickets, so once settled,
// nothing changes until the next event.
func (r *virtualRun) settle(t time.Time) {
	for {
		select {
		case v := <-r.verdicts:
			r.waiting--
			o := &r.out[v.i]
			if v.err != nil {
				o.Status, o.Reason, o.Headers, o.E2E = http.StatusTooManyRequests, reasonOf(v.err), t.Sub(virtualEpoch.Add(o.Arrival)), t.Sub(virtualEpoch.Add(o.Arrival))
				if rej, ok := v.err.(*admission.Rejection); ok {
					o.Status = rej.Status()
				}
				continue
			}
			r.send(&flight{i: v.i, tk: v.tk, queued: v.tk.Wait()}, t)
			continue
		default:
		}
		if r.waiting == queued(r.ctl) {
			return
		}
		runtime.Gosched()
	}
}

// reasonOf is the X-Slogate-Reason slogate's proxy would answer with.
func reasonOf(err error) string {
	if rej, ok := err.(*admission.Rejection); ok {
		return rej.Reason.String()
	}
	return err.Error()
}

// queued returns the requests waiting in ctl's queues.
func queued(ctl *admission.Controller) int {
	n := 0
	for _, t := range ctl.Stats().Tiers {
		for _, q := range t.Queued {
			n += q
		}
	}
	return n
}

// send hands an admitted request to the engine at t.
func (r *virtualRun) send(f *flight, t time.Time) {
	c := r.classes[r.arrivals[f.i].Class]
	id, ok, err := r.eng.Arrive(c.Input, c.Output)
	if err != nil { // a shape the profile cannot serve: the workload's mistake
		panic(err)
	}
	if !ok {
		r.refuse(f, t)
		return
	}
	r.byID[id] = f
}

// refuse records the engine's 503 at its admission caps.
func (r *virtualRun) refuse(f *flight, t time.Time) {
	o := &r.out[f.i]
	o.Status, o.Reason = http.StatusServiceUnavailable, fmt.Sprintf("engine %d", http.StatusServiceUnavailable)
	o.E2E = t.Sub(virtualEpoch.Add(o.Arrival))
	o.Headers = o.E2E
	if f.tk != nil {
		f.tk.Done(measure.Result{Status: http.StatusServiceUnavailable, Outcome: measure.Rejected, Stream: true})
	}
}

// finish records a request the engine finished at t, and ends its ticket with what the
// proxy would have measured of it: TTFT from dispatch, TPOT over its decode.
func (r *virtualRun) finish(f *flight, fin enginesim.Finished, t time.Time) {
	o := &r.out[f.i]
	o.Status, o.Done, o.FirstTok = http.StatusOK, true, fin.OutputTokens > 0
	o.Chunks, o.Tokens = fin.OutputTokens, fin.OutputTokens
	o.Headers = f.queued
	o.TTFT, o.E2E = f.queued+fin.TTFT, t.Sub(virtualEpoch.Add(o.Arrival))
	if f.tk == nil {
		return
	}
	res := measure.Result{
		Status: http.StatusOK, Outcome: measure.OK, Stream: true, OutputChunks: fin.OutputTokens,
		InputTokens: fin.PromptTokens, OutputTokens: fin.OutputTokens,
		TTFT: fin.TTFT, E2E: fin.E2E, QueueWait: f.queued,
	}
	if fin.OutputTokens > 1 {
		res.TPOT = fin.Decode / time.Duration(fin.OutputTokens-1)
	}
	f.tk.Done(res)
}

// cut ends the run at end: requests still running are cut, as the real-time phases
// cancel them, and so are those still in slogate's queue, whose Admit calls cancel
// returns; what they had waited is a lower bound of their TTFT.
func (r *virtualRun) cut(end time.Time, cancel context.CancelFunc) {
	for id, f := range r.byID {
		o := &r.out[f.i]
		o.Status, o.Cut = http.StatusOK, true
		o.Headers, o.E2E = f.queued, end.Sub(virtualEpoch.Add(o.Arrival))
		if f.tk != nil {
			f.tk.Done(measure.Result{Status: statusClientClosed, Outcome: measure.ClientCancelled, Stream: true})
		}
		delete(r.byID, id)
	}
	cancel()
	for ; r.waiting > 0; r.waiting-- {
		v := <-r.verdicts
		if v.tk != nil { // granted as its context ended
			v.tk.Done(measure.Result{Status: statusClientClosed, Outcome: measure.ClientCancelled, Stream: true})
		}
		o := &r.out[v.i]
		o.Cut, o.E2E = true, end.Sub(virtualEpoch.Add(o.Arrival))
	}
}

// statusClientClosed is the status slogate's proxy reports for a request whose client
// went away (proxy.StatusClientClosed).
const statusClientClosed = 499

// scrapedEngine is the engine as the sidecar's scraper last read it: an
// admission.EngineSource. Safe for concurrent use.
type scrapedEngine struct {
	snap atomic.Pointer[engine.Snapshot]
}

func (s *scrapedEngine) set(snap engine.Snapshot) { s.snap.Store(&snap) }

// Latest returns the last scrape; before the first, an engine not yet seen.
func (s *scrapedEngine) Latest() engine.Snapshot {
	if p := s.snap.Load(); p != nil {
		return *p
	}
	return engine.Snapshot{}
}

// earliest returns the earliest of ts.
func earliest(t time.Time, ts ...time.Time) time.Time {
	for _, u := range ts {
		if u.Before(t) {
			t = u
		}
	}
	return t
}
