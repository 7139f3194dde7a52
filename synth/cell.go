package synth

import (
	"fmt"
	"sort"
	"strings"
)

// State is what became of a cell. Its String form is a bounded metric label value.
type State string

// The cell states, as the published benchmarks report them (docs/simulator.md).
const (
	Valid        State = "valid"         // measured; the figures stand
	LoopedState  State = "looped"        // the output repeated itself: discarded
	OverCapacity State = "over_capacity" // not run: concurrency × (context + output) exceeds the KV cache
	Rejected     State = "rej"           // the server refused every request
	NotCompleted State = "n/c"           // no request finished inside the window
	Failed       State = "failed"        // requests failed in every round (see the failure counts)
	Skipped      State = "skipped"       // not run: a smaller cell of the same row failed (staged protection)
)

// States lists every state, for pre-creating metric series.
func States() []State {
	return []State{Valid, LoopedState, OverCapacity, Rejected, NotCompleted, Failed, Skipped}
}

// Cell is one point of a workload: a row (context or shape) at one concurrency, or a
// scan at one offered rate. Its figures are medians over the valid rounds.
type Cell struct {
	Row         string  `json:"row"`
	Input       int     `json:"input_tokens"`
	Output      int     `json:"output_tokens"`
	Concurrency int     `json:"concurrency,omitempty"`
	Multiple    float64 `json:"multiple,omitempty"`     // scan: of the reference rate
	Nominal     float64 `json:"nominal_rate,omitempty"` // scan: requests/s the arrivals were drawn at
	Rate        float64 `json:"offered_rate,omitempty"` // scan: requests/s actually sent (median over rounds)
	State       State   `json:"state"`
	Detail      string  `json:"detail,omitempty"`

	Throughput     float64 `json:"output_tok_per_s"`
	PerRequestTPS  float64 `json:"per_request_tok_per_s"`
	TTFTp50        float64 `json:"ttft_p50_s"`
	TTFTp95        float64 `json:"ttft_p95_s"`
	TPOTp95        float64 `json:"tpot_p95_s"`
	ITLp50         float64 `json:"itl_p50_s"`
	E2Ep50         float64 `json:"e2e_p50_s"`
	ActiveAvg      float64 `json:"active_avg"`
	CompletionRate float64 `json:"completion_rate,omitempty"` // scan: completed requests/s

	Completed   int     `json:"completed"`
	OutputToks  int     `json:"output_tokens_total"`
	SuccessRate float64 `json:"success_rate"` // successful / (sent - cut), over all rounds
	Spread      float64 `json:"round_spread"` // (max - min) / median throughput over valid rounds
	Agreed      bool    `json:"rounds_agreed"`
	Rounds      []Round `json:"rounds"`
}

// finish sets a cell's state and medians from its rounds: rej when every request was
// refused, n/c when none finished, looped when most outputs repeated themselves, failed
// when no round was free of failures, valid otherwise.
func (c *Cell) finish(agreement float64) {
	var sent, succeeded, cut, refused, looped int
	failures := map[string]int{}
	var valid []Round
	for _, r := range c.Rounds {
		sent, succeeded, cut, looped = sent+r.Sent, succeeded+r.Succeeded, cut+r.Cut, looped+r.Looped
		c.Completed += r.Completed
		c.OutputToks += r.OutputToks
		for k, n := range r.Failures {
			failures[k] += n
		}
		refused += r.Failures[HTTPStatus.String()]
		if r.Valid() {
			valid = append(valid, r)
		}
	}
	if judged := sent - cut; judged > 0 {
		c.SuccessRate = float64(succeeded) / float64(judged)
	}
	switch {
	case sent > 0 && refused == sent:
		c.State, c.Detail = Rejected, describe(failures)
	case c.Completed == 0 && len(failures) == 0:
		c.State = NotCompleted
	case looped*2 > sent:
		c.State, c.Detail = LoopedState, fmt.Sprintf("%d of %d outputs repeated themselves", looped, sent)
	case len(valid) == 0:
		c.State, c.Detail = Failed, describe(failures)
	default:
		c.State = Valid
		if len(failures) > 0 {
			c.Detail = describe(failures) + " (rounds with failures left out of the medians)"
		}
	}
	c.medians(valid, agreement)
}

func (c *Cell) medians(valid []Round, agreement float64) {
	if len(valid) == 0 {
		return
	}
	c.Throughput = median(valid, func(r Round) float64 { return r.Throughput })
	c.PerRequestTPS = median(valid, func(r Round) float64 { return r.PerRequestTPS })
	c.TTFTp50 = median(valid, func(r Round) float64 { return r.TTFTp50 })
	c.TTFTp95 = median(valid, func(r Round) float64 { return r.TTFTp95 })
	c.TPOTp95 = median(valid, func(r Round) float64 { return r.TPOTp95 })
	c.ITLp50 = median(valid, func(r Round) float64 { return r.ITLp50 })
	c.E2Ep50 = median(valid, func(r Round) float64 { return r.E2Ep50 })
	c.ActiveAvg = median(valid, func(r Round) float64 { return r.ActiveAvg })
	if c.Nominal > 0 {
		c.Rate = median(valid, func(r Round) float64 { return r.Offered })
	}
	c.CompletionRate = median(valid, func(r Round) float64 {
		if r.Seconds == 0 {
			return 0
		}
		return float64(r.Completed) / r.Seconds
	})
	tputs := make([]float64, len(valid))
	for i, r := range valid {
		tputs[i] = r.Throughput
	}
	c.Spread = spread(tputs)
	c.Agreed = c.Spread <= agreement
}

// describe renders failure counts as "3 http_status, 1 transport".
func describe(failures map[string]int) string {
	keys := make([]string, 0, len(failures))
	for k := range failures {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d %s", failures[k], k)
	}
	return strings.Join(parts, ", ")
}

// stops reports whether a cell's state stops the larger cells of its row.
func (s State) stops() bool { return s == Rejected || s == NotCompleted || s == Failed }

// ContextLabel names a context length as the published benchmarks do, and as a matrix
// names its rows
// (Cell.Row): 8192 → "8K", 257024 → "251K".
func ContextLabel(n int) string {
	if n%1024 == 0 {
		return fmt.Sprintf("%dK", n/1024)
	}
	if n >= 1024 {
		return fmt.Sprintf("%.0fK", float64(n)/1024)
	}
	return fmt.Sprint(n)
}
