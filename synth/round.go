package synth

import (
	"context"
	"time"
)

// Single rounds, for callers that drive their own experiment (slogate calibrate): the
// same requests, runners and measurement rules as a workload's cells.

// PreparePrompts decides, once, how t's prompts are written: token ids when the engine
// takes them, else calibrated text (see PromptKind). Rounds before it use token ids.
func (t *Target) PreparePrompts(ctx context.Context) (PromptKind, error) {
	if t.Model == "" {
		if err := t.DiscoverModel(ctx); err != nil {
			return PromptKind{}, err
		}
	}
	kind, err := t.promptKind(ctx)
	if err == nil {
		t.prompts = kind
	}
	return kind, err
}

// ClosedRound keeps conc streams of shape s busy for dur (each sends its next request
// as soon as the last ended; those running when the window closes are cut) and returns
// the round.
func (t *Target) ClosedRound(ctx context.Context, s Shape, conc int, dur time.Duration) Round {
	return summarize(t.closedLoop(ctx, conc, t.promptMaker(s), &t.seeds, dur, 0))
}

// OpenRound offers requests of shape s at rate per second for dur — Poisson arrivals
// drawn from seed, or evenly spaced — whatever is in flight, waits for them (at most
// drain after the last), and returns the round. Its Offered is the rate actually sent.
func (t *Target) OpenRound(ctx context.Context, s Shape, rate float64, dur time.Duration, poisson bool, seed uint64, drain time.Duration) Round {
	offsets := arrivals(rate, dur, poisson, seed)
	return summarize(t.openLoop(ctx, offsets, dur, t.promptMaker(s), &t.seeds, drain))
}

// promptMaker returns the prompts of shape s, written as PreparePrompts decided.
func (t *Target) promptMaker(s Shape) func(uint64) prompt {
	return func(seed uint64) prompt {
		return prompt{route: t.Route, input: s.Input, output: s.Output, seed: seed, wordsPerToken: t.prompts.WordsPerToken}
	}
}
