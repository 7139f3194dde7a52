package admission

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slogate/slogate/engine"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/wire"
)

// Many clients admit and finish concurrently while time moves, the engine flips between
// idle, saturated and down, and the tiers are reloaded (one of them removed now and
// then). Every Admit returns exactly once, and afterwards nothing is left in flight or
// waiting, in any tier, retired ones included. Run with -race.
func TestConcurrentAdmitDone(t *testing.T) {
	for _, mode := range []Mode{Enforce, Shadow} {
		t.Run(mode.String(), func(t *testing.T) {
			both := Config{Tiers: []TierConfig{
				{Name: "small", MaxInputTokens: 100, MaxInFlight: 4, MaxQueue: 8, MaxQueueWait: measure.Duration(time.Second), Rate: 500, Burst: 50},
				{Name: "big", MaxInFlight: 2, MaxQueue: 4, MaxQueueWait: measure.Duration(2 * time.Second)},
			}, Feedback: Feedback{MinSamples: 5}}
			narrow := both
			narrow.Tiers = []TierConfig{both.Tiers[0], both.Tiers[1]}
			narrow.Tiers[0].MaxInFlight, narrow.Tiers[1].Name = 2, "other"
			h := newHarness(t, mode, both, func(o *Options) { o.Saturation.FailClosed = true })

			const clients, each = 16, 40
			var returned, granted atomic.Int64
			var wg sync.WaitGroup
			for i := range clients {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(i), 7))
					for range each {
						ctx, cancel := context.WithCancel(context.Background())
						if rng.IntN(8) == 0 {
							cancel() // a client that is gone already, or leaves soon
						}
						r := Request{Model: "m", Class: Class(rng.IntN(int(numClasses))),
							Prompt: wire.PromptSize{TokenIDs: rng.IntN(200), Prompts: 1}}
						tk, err := h.c.Admit(ctx, r)
						returned.Add(1)
						var rej *Rejection
						switch {
						case err == nil && tk != nil:
							granted.Add(1)
							h.holdFor(time.Duration(rng.IntN(300)) * time.Millisecond)
							tk.Done(measure.Result{Stream: true, Outcome: measure.OK, OutputChunks: 10, TTFT: time.Duration(rng.IntN(2000)) * time.Millisecond})
							if rng.IntN(4) == 0 {
								tk.Done(ok) // a second Done must change nothing
							}
						case errors.As(err, &rej):
							// Turned away: try again after two of the ticker's steps, as a
							// client would back off. Without it, a ticker goroutine that the
							// scheduler sets aside (a loaded machine) left the clients to
							// spend every request inside one engine-down phase in a few
							// milliseconds, and none was granted. With it, each client's
							// requests span more than one 40-step down phase.
							h.holdFor(100 * time.Millisecond)
						case errors.Is(err, context.Canceled):
						default:
							t.Errorf("Admit = %v, %v", tk, err)
						}
						cancel()
					}
				})
			}
			stop := make(chan struct{})
			var ticker sync.WaitGroup
			ticker.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					h.clock.Step(50 * time.Millisecond)
					switch i % 100 {
					case 30:
						h.eng.Set(snap(h.clock.Now(), func(s *engine.Snapshot) { s.Waiting = 100 }))
					case 40, 65:
						h.eng.Set(snap(h.clock.Now()))
					case 60:
						h.eng.Set(engine.NewSnapshot())
					case 80:
						_ = h.c.Reload(narrow)
					case 0:
						h.eng.Set(snap(h.clock.Now()))
						_ = h.c.Reload(both)
					default:
						if s := h.eng.Latest(); s.Up { // keep a fresh snapshot fresh
							s.At = h.clock.Now()
							h.eng.Set(s)
						}
					}
					h.c.Tick()
				}
			})
			wg.Wait()
			close(stop)
			ticker.Wait()

			if got := returned.Load(); got != clients*each {
				t.Fatalf("%d Admits returned, want %d", got, clients*each)
			}
			h.c.Tick()
			h.c.mu.Lock()
			defer h.c.mu.Unlock()
			for _, ts := range h.c.all() {
				if ts.inFlight != 0 || ts.shadowed != 0 || ts.queued != 0 || h.c.next(ts) != nil {
					t.Errorf("tier %s: in flight %d, shadowed %d, queued %d", ts.cfg.Name, ts.inFlight, ts.shadowed, ts.queued)
				}
			}
			if len(h.c.retired) != 0 {
				t.Errorf("%d retired tiers left", len(h.c.retired))
			}
			if granted.Load() == 0 || mode == Shadow && granted.Load() != clients*each {
				t.Errorf("%d of %d granted", granted.Load(), clients*each)
			}
			t.Log(fmt.Sprintf("%d granted; decisions by reason:", granted.Load()), reasonCounts(h.rec))
		})
	}
}

// holdFor returns once the fake clock has moved on by d: a request in flight that long.
func (h *harness) holdFor(d time.Duration) {
	until := h.clock.Now().Add(d)
	for h.clock.Now().Before(until) {
		runtime.Gosched()
	}
}

func reasonCounts(r *recorder) map[string]int {
	m := map[string]int{}
	for _, d := range r.all() {
		m[d.Verdict.String()+"/"+d.Reason.String()]++
	}
	return m
}
