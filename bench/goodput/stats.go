package main

import (
	"math"
	"net/http"
	"slices"
	"time"

	"github.com/slogate/slogate/measure"
)

// outcome is what the client saw of one request.
type outcome struct {
	Arrival  time.Duration // when it was sent, from the start of the run
	Class    int
	Status   int           // HTTP status; 0 when no response came
	Reason   string        // X-Slogate-Reason of a rejection
	Headers  time.Duration // send -> response headers (for an admitted request: slogate's queue wait, and the way there and back)
	FirstTok bool          // an output chunk arrived
	Chunks   int           // chunks carrying output that arrived
	TTFT     time.Duration // send -> first output chunk (client side: includes slogate's queue)
	E2E      time.Duration // send -> end of the stream (or the cut-off)
	Tokens   int           // completion_tokens of the usage report
	Done     bool          // data: [DONE] arrived
	Cut      bool          // still running at the cut-off and cancelled there
	Err      bool          // transport or stream error
}

// rejected reports a request slogate turned away (429 or 503).
func (o outcome) rejected() bool {
	return o.Status == http.StatusTooManyRequests || o.Status == http.StatusServiceUnavailable
}

// completed reports a request that succeeded: 200, the end marker, and all want tokens.
func (o outcome) completed(want int) bool {
	return o.Status == http.StatusOK && o.Done && !o.Err && !o.Cut && o.FirstTok && o.Tokens == want
}

// tpot returns (E2E - TTFT) / (tokens - 1), or 0 with fewer than two tokens.
func (o outcome) tpot() time.Duration {
	if o.Tokens < 2 {
		return 0
	}
	return (o.E2E - o.TTFT) / time.Duration(o.Tokens-1)
}

// good reports a completed request that met the SLO as its client saw it: its TTFT
// (slogate's queue wait included) and its TPOT by measure.SLO.Met, the rule slogate's
// own metrics and status page judge by.
func (o outcome) good(want int, s measure.SLO) bool {
	return o.completed(want) && s.Met(o.TTFT, o.tpot())
}

// summary condenses the outcomes of one class measured over one window.
type summary struct {
	Offered    int // requests sent in the window: the denominator of every rate
	Good       int
	Completed  int
	Rejected   int
	Failed     int // neither completed, rejected nor cut: errors, short streams
	Unfinished int // cut at the cut-off (they could no longer be good)
	Window     time.Duration

	Goodput    float64 // good requests per second of window, over all offered
	RejectRate float64 // rejected / offered

	// P95TTFT is over admitted requests (all but the rejected): a request cut before
	// its first token counts with the time it had waited, a lower bound, and
	// TTFTCensored says whether such a bound is at or above the reported percentile
	// (the true value is then at least that).
	P95TTFT      time.Duration
	TTFTCensored bool
	P50TTFT      time.Duration
	P95TPOT      time.Duration // over completed requests
	MeanE2E      time.Duration // over completed requests
	Reasons      map[string]int
}

// summarize measures the outcomes of class cls whose arrival lies in [from, from+window).
func summarize(os []outcome, cls, want int, s measure.SLO, from, window time.Duration) summary {
	sum := summary{Window: window, Reasons: map[string]int{}}
	var ttfts, tpots []time.Duration
	var censored []time.Duration
	var e2e time.Duration
	for _, o := range os {
		if o.Class != cls || o.Arrival < from || o.Arrival >= from+window {
			continue
		}
		sum.Offered++
		switch {
		case o.rejected():
			sum.Rejected++
			sum.Reasons[o.Reason]++
			continue
		case o.completed(want):
			sum.Completed++
			tpots = append(tpots, o.tpot())
			e2e += o.E2E
			if o.good(want, s) {
				sum.Good++
			}
		case o.Cut:
			sum.Unfinished++
		default:
			sum.Failed++
		}
		switch {
		case o.FirstTok:
			ttfts = append(ttfts, o.TTFT)
		case o.Cut:
			ttfts = append(ttfts, o.E2E) // waited this long without a token: a lower bound
			censored = append(censored, o.E2E)
		}
	}
	if sum.Offered > 0 {
		sum.RejectRate = float64(sum.Rejected) / float64(sum.Offered)
	}
	if window > 0 {
		sum.Goodput = float64(sum.Good) / window.Seconds()
	}
	if sum.Completed > 0 {
		sum.MeanE2E = e2e / time.Duration(sum.Completed)
	}
	sum.P95TTFT = percentile(ttfts, 0.95)
	sum.P50TTFT = percentile(ttfts, 0.50)
	sum.P95TPOT = percentile(tpots, 0.95)
	for _, c := range censored {
		if len(ttfts) > 0 && c >= sum.P95TTFT {
			sum.TTFTCensored = true
		}
	}
	return sum
}

// percentile returns the q-quantile of xs by nearest rank (the smallest value with at
// least q of the values at or below it), as admission's feedback computes its p95; 0
// for no values. xs is not modified.
func percentile(xs []time.Duration, q float64) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := int(math.Ceil(q * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}
