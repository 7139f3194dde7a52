package synth

import (
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/internal/simnet"
	"github.com/slogate/slogate/measure"
)

// round is a valid round of n successful requests at throughput tput.
func round(n int, tput float64) Round {
	return Round{Sent: n, Succeeded: n, Completed: n, Seconds: 10, OutputToks: int(tput * 10), Throughput: tput,
		TTFTp50: tput / 1000, TTFTp95: tput / 500, TPOTp95: 0.02, E2Ep50: 1, ActiveAvg: float64(n)}
}

func withFailures(r Round, failures map[string]int) Round {
	r.Failures = failures
	for _, n := range failures {
		r.Sent += n
	}
	return r
}

func TestCellFinish(t *testing.T) {
	tests := []struct {
		name       string
		rounds     []Round
		nominal    float64
		state      State
		detail     string // fragment
		throughput float64
		spread     float64
		agreed     bool
		success    float64
	}{
		{
			name:   "rej: every request refused",
			rounds: []Round{{Sent: 4, Failures: map[string]int{"http_status": 4}}, {Sent: 4, Failures: map[string]int{"http_status": 4}}},
			state:  Rejected, detail: "8 http_status",
		},
		{
			// The round has no failures, so its figures (the tokens streamed inside the
			// window) are still the cell's; reports show the state, not the figures.
			name:   "n/c: nothing finished in the window",
			rounds: []Round{{Sent: 4, Cut: 4, Throughput: 12}},
			state:  NotCompleted, throughput: 12, agreed: true,
		},
		{
			name:   "looped: most outputs repeated themselves",
			rounds: []Round{func() Round { r := round(4, 100); r.Looped = 3; return r }()},
			state:  LoopedState, detail: "3 of 4 outputs", throughput: 100, success: 1, agreed: true,
		},
		{
			name:   "half looped is not looped",
			rounds: []Round{func() Round { r := round(4, 100); r.Looped = 2; return r }()},
			state:  Valid, throughput: 100, success: 1, agreed: true,
		},
		{
			name: "failed: failures in every round",
			rounds: []Round{
				withFailures(round(3, 100), map[string]int{"transport": 1}),
				withFailures(round(2, 90), map[string]int{"wrong_length": 2}),
			},
			state: Failed, detail: "1 transport, 2 wrong_length", success: 5.0 / 8,
		},
		{
			name:   "failed: some refused, none succeeded",
			rounds: []Round{{Sent: 4, Failures: map[string]int{"http_status": 2, "transport": 2}}},
			state:  Failed, detail: "2 http_status, 2 transport",
		},
		{
			name: "valid with failures in one round: medians over the clean rounds",
			rounds: []Round{
				withFailures(round(4, 1000), map[string]int{"empty_output": 1}),
				round(4, 100), round(4, 110),
			},
			state: Valid, detail: "1 empty_output (rounds with failures left out", throughput: 105,
			spread: 10.0 / 105, agreed: false, success: 12.0 / 13,
		},
		{
			name:   "valid, rounds agree within 6%",
			rounds: []Round{round(4, 100), round(4, 103), round(4, 105)},
			state:  Valid, throughput: 103, spread: 5.0 / 103, agreed: true, success: 1,
		},
		{
			name:   "valid, cut requests are not judged",
			rounds: []Round{func() Round { r := round(4, 100); r.Sent, r.Cut = 6, 2; return r }()},
			state:  Valid, throughput: 100, agreed: true, success: 1,
		},
		{
			name:    "scan: offered rate is the median over valid rounds",
			rounds:  []Round{func() Round { r := round(4, 100); r.Offered = 1.5; return r }(), func() Round { r := round(4, 100); r.Offered = 1.7; return r }()},
			nominal: 1.6, state: Valid, throughput: 100, agreed: true, success: 1,
		},
		{
			name:   "no rounds (ctx ended first)",
			rounds: nil,
			state:  NotCompleted,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := Cell{Rounds: tc.rounds, Nominal: tc.nominal}
			c.finish(0.06)
			if c.State != tc.state || !strings.Contains(c.Detail, tc.detail) {
				t.Errorf("state %q detail %q; want %q with %q", c.State, c.Detail, tc.state, tc.detail)
			}
			if !near(c.Throughput, tc.throughput) || !near(c.Spread, tc.spread) || c.Agreed != tc.agreed || !near(c.SuccessRate, tc.success) {
				t.Errorf("throughput %v spread %v agreed %v success %v; want %v %v %v %v",
					c.Throughput, c.Spread, c.Agreed, c.SuccessRate, tc.throughput, tc.spread, tc.agreed, tc.success)
			}
			completed, tokens := 0, 0
			for _, r := range tc.rounds {
				completed, tokens = completed+r.Completed, tokens+r.OutputToks
			}
			if c.Completed != completed || c.OutputToks != tokens {
				t.Errorf("completed %d, tokens %d; want the sums over every round, %d and %d", c.Completed, c.OutputToks, completed, tokens)
			}
		})
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// The medians of a valid cell are taken figure by figure over its valid rounds.
func TestCellMedians(t *testing.T) {
	bad := withFailures(round(4, 1000), map[string]int{"transport": 1})
	bad.TTFTp50, bad.Offered = 100, 100
	a, b, c3 := round(4, 100), round(4, 120), round(4, 110)
	a.Offered, b.Offered, c3.Offered = 1, 3, 2
	c := Cell{Rounds: []Round{bad, a, b, c3}, Nominal: 2}
	c.finish(0.5)
	want := map[string][2]float64{
		"throughput": {c.Throughput, 110}, "ttft p50": {c.TTFTp50, 0.11}, "ttft p95": {c.TTFTp95, 0.22},
		"tpot p95": {c.TPOTp95, 0.02}, "e2e": {c.E2Ep50, 1}, "active": {c.ActiveAvg, 4}, "rate": {c.Rate, 2},
		"completion rate": {c.CompletionRate, 0.4},
	}
	for name, v := range want {
		if !near(v[0], v[1]) {
			t.Errorf("%s = %v, want %v", name, v[0], v[1])
		}
	}
}

func TestStates(t *testing.T) {
	stops := map[State]bool{Rejected: true, NotCompleted: true, Failed: true}
	for _, s := range States() {
		if s.stops() != stops[s] {
			t.Errorf("%s.stops() = %v", s, s.stops())
		}
		if strings.ContainsAny(string(s), " \"") {
			t.Errorf("state %q is not a label value", s)
		}
	}
	if len(States()) != 7 {
		t.Errorf("%d states", len(States()))
	}
}

func TestContextLabel(t *testing.T) {
	for n, want := range map[int]string{8192: "8K", 131072: "128K", 257024: "251K", 262144: "256K", 1000: "1000", 1500: "1K", 2000: "2K", 64: "64"} {
		if got := ContextLabel(n); got != want {
			t.Errorf("ContextLabel(%d) = %q, want %q", n, got, want)
		}
	}
}

// rowStates returns the states of a report's cells, row by row, for messages.
func rowStates(rep Report) string {
	var b strings.Builder
	for _, c := range rep.Cells {
		fmt.Fprintf(&b, "%s@%d=%s ", c.Row, c.Concurrency, c.State)
	}
	return b.String()
}

// Staged protection: after a cell that was refused, finished nothing or failed, the
// larger cells of its row are skipped, and the next row starts afresh. On virtual time
// (virtual_test.go): the failure backoffs and the n/c round's window take no real time.
func TestStagedProtection(t *testing.T) {
	slow := simProfile(t, "tiny", func(p *enginesim.Profile) { p.Timing = enginesim.Timing{StepBase: 0.005} })
	tests := []struct {
		name     string
		cfg      enginesim.Config
		output   int
		duration time.Duration
		first    State
	}{
		{"rej", enginesim.Config{Faults: enginesim.Faults{Status: http.StatusTooManyRequests}}, 8, 0, Rejected},
		// 5 ms steps: the 16-token warm-up takes 0.1 s, a 2,000-token answer 10 s.
		{"n/c", enginesim.Config{Profile: slow}, 2000, 300 * time.Millisecond, NotCompleted},
		{"failed", enginesim.Config{Faults: enginesim.Faults{DropAfter: 3}}, 8, 0, Failed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, tg := countedVirtualSim(t, tc.cfg)
				w := Workload{
					Name: "staged", Kind: Shapes, Shapes: []Shape{{"a", 32, tc.output}, {"b", 64, tc.output}},
					Concurrency: []int{1, 2, 4}, Duration: measure.Duration(tc.duration), Requests: 1,
				}
				var progress []string
				rep, err := Run(t.Context(), tg, w, Options{Progress: func(done, total int, cell Cell) {
					progress = append(progress, fmt.Sprintf("%d/%d", done, total))
				}})
				if err != nil {
					t.Fatal(err)
				}
				want := []State{tc.first, Skipped, Skipped, tc.first, Skipped, Skipped}
				if len(rep.Cells) != len(want) {
					t.Fatalf("%d cells, want %d: %s", len(rep.Cells), len(want), rowStates(rep))
				}
				for i, cell := range rep.Cells {
					if cell.State != want[i] {
						t.Errorf("cell %d: %s, want %s (%s)", i, cell.State, want[i], rowStates(rep))
					}
					if cell.State == Skipped && (len(cell.Rounds) != 0 || cell.Detail == "") {
						t.Errorf("a skipped cell ran or says nothing: %+v", cell)
					}
				}
				// Only the first cell of each row sent anything: its warm-up and one round
				// (and the run asked once whether the engine takes token-id prompts).
				if arrived, _ := c.counts(); arrived > 1+2*(1+1) {
					t.Errorf("%d requests reached the engine, want at most 5", arrived)
				}
				if strings.Join(progress, " ") != "1/6 2/6 3/6 4/6 5/6 6/6" {
					t.Errorf("progress %v", progress)
				}
			})
		})
	}
}

// Cells whose streams would not fit in the engine's KV cache are not run: the capacity
// comes from the engine's metrics; without them every cell runs. On virtual time
// (virtual_test.go).
func TestOverCapacity(t *testing.T) {
	small := simProfile(t, "tiny", func(p *enginesim.Profile) { p.NumBlocks = 1024 }) // 16,384 tokens
	w := Workload{Name: "kv", Kind: Matrix, Contexts: []int{1024, 4096}, Concurrency: []int{1, 4, 8}, Output: 16, Requests: 1}
	t.Run("capacity known", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			_, tg := countedVirtualSim(t, enginesim.Config{Profile: small})
			rep, err := Run(t.Context(), tg, w, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if rep.KVCapacity != 16384 || rep.Engine != "vllm" {
				t.Errorf("KV capacity %d, engine %q; want 16384, vllm", rep.KVCapacity, rep.Engine)
			}
			// 8 x 4,096 > 16,384; 4 x 4,096 = 16,384 fits.
			want := []State{Valid, Valid, Valid, Valid, Valid, OverCapacity}
			for i, c := range rep.Cells {
				if c.State != want[i] {
					t.Errorf("cell %d: %s, want %s (%s)", i, c.State, want[i], rowStates(rep))
				}
			}
			if c := rep.Cells[5]; c.Detail != "8 x 4096 tokens > KV capacity 16384" || len(c.Rounds) != 0 {
				t.Errorf("over-capacity cell %+v", c)
			}
			if len(rep.Prefill) != 2 || rep.Prefill[1].Context != 4096 || rep.Prefill[1].Failure != "" || rep.Prefill[1].TTFT <= 0 {
				t.Errorf("prefill %+v", rep.Prefill)
			}
		})
	})
	t.Run("capacity unknown", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			_, ms := simnet.Start(t, enginesim.Config{Profile: small}, func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Path == "/metrics" {
						http.NotFound(w, r)
						return
					}
					h.ServeHTTP(w, r)
				})
			})
			tg := &Target{BaseURL: ms.URL, Model: small.Model, Client: ms.Client}
			w := w
			w.Contexts = []int{4096}
			rep, err := Run(t.Context(), tg, w, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if rep.KVCapacity != 0 {
				t.Errorf("KV capacity %d, want unknown", rep.KVCapacity)
			}
			for _, c := range rep.Cells {
				if c.State == OverCapacity {
					t.Errorf("cell run as over capacity without a known capacity: %s", rowStates(rep))
				}
			}
		})
	})
}
