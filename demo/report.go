package demo

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/wire"
)

// What the demo prints while it runs: a line per interval with what slogate measured.

// report prints what slogate measured every interval until ctx is done.
func (d *demo) report(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fmt.Fprintln(d.out, d.tally.summary("last "+every.String()))
			d.tally.reset()
		}
	}
}

// tally keeps what slogate measured, for the demo's summaries. Safe for concurrent use.
type tally struct {
	mu                    sync.Mutex
	ok, failed, cancelled int
	tokens                int
	ttft, tpot            []time.Duration
	allOK                 int
}

// Observe implements proxy.Observer.
func (t *tally) Observe(_ wire.Request, res measure.Result) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch res.Outcome {
	case measure.OK:
	case measure.ClientCancelled:
		t.cancelled++
		return
	default:
		t.failed++
		return
	}
	t.ok++
	t.allOK++
	t.tokens += res.OutputTokens
	if res.Stream {
		t.ttft = append(t.ttft, res.TTFT)
		if res.TPOT > 0 {
			t.tpot = append(t.tpot, res.TPOT)
		}
	}
}

func (t *tally) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ok, t.failed, t.cancelled, t.tokens, t.ttft, t.tpot = 0, 0, 0, 0, nil, nil
}

func (t *tally) summary(span string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if span == "total" {
		return fmt.Sprintf("slogate measured %d successful requests", t.allOK)
	}
	return fmt.Sprintf("%-9s %4d ok %3d failed %3d gave up  %6d tokens  TTFT p50 %s p95 %s  TPOT p50 %s",
		span, t.ok, t.failed, t.cancelled, t.tokens, ms(pct(t.ttft, 50)), ms(pct(t.ttft, 95)), ms(pct(t.tpot, 50)))
}

func pct(xs []time.Duration, p int) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond)) }
