package admission

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/slogate/slogate/engine"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/wire"
)

// ledgerView is what the ledger reports: InFlight and LiveInFlight.
type ledgerView struct {
	requests int
	kv       int64
	live     int
	liveKV   int64
}

// wantLedger fails unless the ledger reports want.
func (h *harness) wantLedger(want ledgerView) {
	h.t.Helper()
	var got ledgerView
	got.requests, got.kv = h.c.InFlight()
	got.live, got.liveKV = h.c.LiveInFlight()
	if got != want {
		h.t.Fatalf("ledger %+v, want %+v", got, want)
	}
}

// liveOnly is a ledger of live requests alone.
func liveOnly(requests int, kv int64) ledgerView { return ledgerView{requests, kv, requests, kv} }

// TestLedger follows requests through admission in each mode: a request counts in the
// ledger, with its estimated prompt, once it is admitted (at once, or when the queue
// grants it), never while it waits or when it is turned away; Output adds its output so
// far; Done takes it out, once.
func TestLedger(t *testing.T) {
	tests := []struct {
		name  string
		modes []Mode
		cfg   Config
		opts  func(*Options)
		run   func(h *harness)
	}{
		{name: "admitted at once, output as it streams, done", modes: []Mode{Off, Shadow, Enforce}, cfg: tierConfig(),
			run: func(h *harness) {
				h.wantLedger(ledgerView{})
				a := h.admitNow(req(100))
				h.wantLedger(liveOnly(1, 100))
				a.Output(3)
				h.wantLedger(liveOnly(1, 103))
				a.Output(2) // a running total: a lower one changes nothing
				a.Output(3)
				h.wantLedger(liveOnly(1, 103))
				a.Output(7)
				h.wantLedger(liveOnly(1, 107))
				a.Done(ok)
				h.wantLedger(ledgerView{})
				a.Output(9) // after Done: nothing
				a.Done(ok)
				h.wantLedger(ledgerView{})
			}},
		{name: "probes counted apart from live traffic", modes: []Mode{Off, Shadow, Enforce},
			cfg: tierConfig(func(tc *TierConfig) { tc.MaxInFlight = 5 }),
			run: func(h *harness) {
				pr := h.admitNow(Request{Model: "m", Class: Probe, Prompt: wire.PromptSize{TokenIDs: 30, Prompts: 1}})
				b := h.admitNow(Request{Model: "m", Class: Batch, Prompt: wire.PromptSize{TokenIDs: 20, Prompts: 1}})
				pr.Output(4)
				h.wantLedger(ledgerView{requests: 2, kv: 54, live: 1, liveKV: 20})
				b.Done(ok)
				h.wantLedger(ledgerView{requests: 1, kv: 34})
				pr.Done(ok)
				h.wantLedger(ledgerView{})
			}},
		{name: "turned away at once: never counts", modes: []Mode{Enforce},
			cfg: tierConfig(func(tc *TierConfig) { tc.Rate, tc.Burst, tc.MaxInFlight = 1, 1, 9 }),
			run: func(h *harness) {
				a := h.admitNow(req(100))
				h.rejectNow(req(50), TierRate)
				h.wantLedger(liveOnly(1, 100))
				a.Done(ok)
				h.wantLedger(ledgerView{})
			}},
		{name: "what enforce would turn away runs, and counts", modes: []Mode{Shadow, Off},
			cfg: tierConfig(func(tc *TierConfig) { tc.Rate, tc.Burst, tc.MaxInFlight = 1, 1, 9 }),
			run: func(h *harness) {
				a, b := h.admitNow(req(100)), h.admitNow(req(50))
				h.wantLedger(liveOnly(2, 150))
				a.Done(ok)
				b.Done(ok)
				h.wantLedger(ledgerView{})
			}},
		{name: "queued: counts once granted", modes: []Mode{Enforce}, cfg: tierConfig(),
			run: func(h *harness) {
				a := h.admitNow(req(100))
				p := h.admitAsync(req(50), 1)
				h.wantLedger(liveOnly(1, 100))
				a.Output(5)
				a.Done(ok)
				b := h.granted(p)
				h.wantLedger(liveOnly(1, 50))
				b.Output(4)
				h.wantLedger(liveOnly(1, 54))
				b.Done(ok)
				h.wantLedger(ledgerView{})
			}},
		{name: "what enforce would queue runs, and counts at once", modes: []Mode{Shadow}, cfg: tierConfig(),
			run: func(h *harness) {
				a, b := h.admitNow(req(100)), h.admitNow(req(50))
				wantDecision(h.t, h.rec.last(h.t), Decision{Verdict: Queued, Reason: InFlightCap, Shadow: true})
				h.wantLedger(liveOnly(2, 150))
				a.Done(ok) // enforce would dispatch b now: it counts once still
				h.wantLedger(liveOnly(1, 50))
				b.Done(ok)
				h.wantLedger(ledgerView{})
			}},
		{name: "the client leaves the queue: never counts", modes: []Mode{Enforce}, cfg: tierConfig(),
			run: turnedAwayFromQueue(ClientGone, func(_ *harness, p *pending) { p.cancel() })},
		{name: "the queue wait runs out: never counts", modes: []Mode{Enforce}, cfg: tierConfig(),
			run: turnedAwayFromQueue(QueueTimeout, func(h *harness, _ *pending) {
				h.clock.Step(2 * time.Second)
				h.c.Tick()
			})},
		{name: "the engine goes down while it waits: never counts", modes: []Mode{Enforce}, cfg: tierConfig(),
			opts: func(o *Options) { o.Saturation.FailClosed = true },
			run: turnedAwayFromQueue(EngineDown, func(h *harness, _ *pending) {
				h.eng.Set(engine.NewSnapshot())
				h.c.Tick()
			})},
	}
	for _, tt := range tests {
		for _, mode := range tt.modes {
			t.Run(tt.name+"/"+mode.String(), func(t *testing.T) {
				var opts []func(*Options)
				if tt.opts != nil {
					opts = append(opts, tt.opts)
				}
				tt.run(newHarness(t, mode, tt.cfg, opts...))
			})
		}
	}
}

// turnedAwayFromQueue is a TestLedger run in which a request waits behind another until
// end makes admission turn it away for reason: it never counts in the ledger.
func turnedAwayFromQueue(reason Reason, end func(h *harness, p *pending)) func(h *harness) {
	return func(h *harness) {
		a := h.admitNow(req(100))
		p := h.admitAsync(req(50), 1)
		end(h, p)
		h.refused(p, reason)
		h.wantLedger(liveOnly(1, 100))
		a.Done(ok)
		h.wantLedger(ledgerView{})
	}
}

// The ledger's prompt tokens are admission's own estimate: text at the bytes per token
// learned for the model (4 until a usage report teaches it). Its saturation check adds
// them, and the output so far, to the request at hand against the engine's capacity.
func TestSaturationByOwnTokens(t *testing.T) {
	const capacity = 1000 // saturated above 0.9 × 1000 = 900 tokens
	text := func(n int) Request { return Request{Model: "m", Prompt: wire.PromptSize{TextBytes: n, Prompts: 1}} }
	tests := []struct {
		name      string
		learn     bool // a usage report taught "m" 2 bytes per token first
		prompt    int  // text bytes of the request in flight
		output    int  // its output so far
		kv        int64
		saturated bool // for a request of 60 more tokens
	}{
		{name: "learned ratio: 850 tokens in flight", learn: true, prompt: 1700, kv: 850, saturated: true},
		{name: "default ratio: the same text is 425", prompt: 1700, kv: 425},
		{name: "learned ratio with output: 700 + 150", learn: true, prompt: 1400, output: 150, kv: 850, saturated: true},
		{name: "learned ratio with less output: 700 + 100", learn: true, prompt: 1400, output: 100, kv: 800},
		{name: "exactly at the threshold: 840 + 60", learn: true, prompt: 1680, kv: 840},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Enforce, tierConfig(func(tc *TierConfig) { tc.MaxInFlight = 10 }))
			h.eng.Set(snap(h.clock.Now(), func(s *engine.Snapshot) { s.KVCapacityTokens = capacity }))
			if tt.learn {
				h.admitNow(text(2000)).Done(measure.Result{Outcome: measure.OK, InputTokens: 1000})
			}
			inFlight := h.admitNow(text(tt.prompt))
			inFlight.Output(tt.output)
			h.wantLedger(liveOnly(1, tt.kv))
			if !tt.saturated {
				h.admitNow(req(60)).Done(ok)
				wantDecision(t, h.rec.last(t), Decision{Verdict: Admitted})
				inFlight.Done(ok)
				h.wantLedger(ledgerView{})
				return
			}
			p := h.admitAsync(req(60), 1)
			h.c.Tick()
			if got := h.only().Queued[Interactive]; got != 1 {
				t.Fatalf("granted while slogate's own tokens saturate the engine (%d waiting)", got)
			}
			h.wantLedger(liveOnly(1, tt.kv)) // the waiting one does not count
			inFlight.Done(ok)                // frees the tokens and moves the queue on
			h.granted(p).Done(ok)
			wantDecision(t, h.rec.last(t), Decision{Verdict: Queued, Reason: Saturated})
			h.wantLedger(ledgerView{})
		})
	}
}

// Output is on the per-chunk path: it must not allocate.
func TestOutputDoesNotAllocate(t *testing.T) {
	for _, mode := range []Mode{Off, Enforce} {
		h := newHarness(t, mode, tierConfig())
		tk := h.admitNow(req(10))
		n := 0
		if allocs := testing.AllocsPerRun(1000, func() { n++; tk.Output(n) }); allocs != 0 {
			t.Errorf("%s: Output allocates %v times a call", mode, allocs)
		}
		tk.Done(ok)
		h.wantLedger(ledgerView{})
	}
}

// Many requests admitted, streaming and ending at once, some with an Output racing
// their Done from another goroutine, leave the ledger empty. Run with -race.
func TestLedgerConcurrent(t *testing.T) {
	for _, mode := range []Mode{Off, Shadow, Enforce} {
		t.Run(mode.String(), func(t *testing.T) {
			h := newHarness(t, mode, tierConfig(func(tc *TierConfig) { tc.MaxInFlight, tc.MaxQueue = 4, 64 }))
			const clients, each = 8, 50
			var wg sync.WaitGroup
			for i := range clients {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(i), 11))
					for range each {
						r := Request{Model: "m", Class: Class(rng.IntN(int(numClasses))),
							Prompt: wire.PromptSize{TokenIDs: rng.IntN(100), TextBytes: rng.IntN(400), Prompts: 1}}
						tk, err := h.c.Admit(context.Background(), r)
						var rej *Rejection
						if errors.As(err, &rej) {
							continue
						}
						if err != nil {
							t.Errorf("Admit: %v", err)
							return
						}
						for n := range rng.IntN(20) {
							tk.Output(n + 1)
						}
						var racer sync.WaitGroup
						racer.Go(func() { tk.Output(1000) })
						tk.Done(measure.Result{Outcome: measure.OK, InputTokens: r.Prompt.TokenIDs + 1 + r.Prompt.TextBytes/3})
						racer.Wait()
					}
				})
			}
			// A reader, as the exporter and the prober are, while it all runs.
			stop := make(chan struct{})
			var reader sync.WaitGroup
			reader.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					if n, _ := h.c.InFlight(); n < 0 || n > clients {
						t.Errorf("%d requests in flight with %d clients", n, clients)
						return
					}
					h.c.Tick()
				}
			})
			wg.Wait()
			close(stop)
			reader.Wait()
			h.wantLedger(ledgerView{})
		})
	}
}
