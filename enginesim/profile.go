package enginesim

import (
	"fmt"
	"math"
	"sort"
	"time"
)

// Timing is the cost model of one scheduler step (one forward pass of the batch). A step
// that computes the prefill chunks and decode tokens described by a StepShape takes
//
//	StepBase
//	  + PerPrefillToken · prefill tokens
//	  + PerPrefillAttn  · Σ over prefill tokens of the context position they attend to
//	  + PerDecodeSeq    · sequences decoding
//	  + PerKVToken      · KV tokens those sequences read
//	  + PerWaitingSeq   · requests left waiting
//
// seconds. The attention term makes prefill quadratic in context length; the decode terms
// make steps slower as the batch and its resident KV grow. The last term is scheduler
// overhead that grows with the queue: SGLang's default longest-prefix-match policy matches
// every waiting prompt against its radix cache on every step. It is what turns a queue
// that grows past the knee into one that grows faster.
type Timing struct {
	StepBase        float64 // seconds every step costs (kernel launches, sampling, scheduling)
	PerPrefillToken float64 // seconds per prefill token (the linear, MLP-bound part)
	PerPrefillAttn  float64 // seconds per prefill token per token of context it attends to
	PerDecodeSeq    float64 // seconds per sequence in the decode batch
	PerKVToken      float64 // seconds per resident KV token read by decoding sequences
	PerWaitingSeq   float64 // seconds per request left in the waiting queue
}

func (t Timing) valid() bool {
	for _, v := range []float64{t.StepBase, t.PerPrefillToken, t.PerPrefillAttn, t.PerDecodeSeq, t.PerKVToken, t.PerWaitingSeq} {
		if !(v >= 0) || math.IsInf(v, 0) {
			return false
		}
	}
	return true
}

// StepShape summarises the work in one step; Timing turns it into a duration.
type StepShape struct {
	PrefillTokens int     // prompt tokens computed in this step (chunked prefill)
	PrefillAttn   float64 // Σ over those tokens of their context position
	DecodeSeqs    int     // sequences producing a token without prefill work
	DecodeKV      int     // KV tokens resident for the decoding sequences
	Waiting       int     // requests left waiting after admission
}

// StepTime returns the duration of a step of the given shape. It is a pure function.
func (t Timing) StepTime(s StepShape) time.Duration {
	sec := t.StepBase +
		t.PerPrefillToken*float64(s.PrefillTokens) +
		t.PerPrefillAttn*s.PrefillAttn +
		t.PerDecodeSeq*float64(s.DecodeSeqs) +
		t.PerKVToken*float64(s.DecodeKV) +
		t.PerWaitingSeq*float64(s.Waiting)
	return time.Duration(math.Round(sec * float64(time.Second)))
}

// Speculation models speculative decoding: every decode step of a sequence verifies
// DraftTokens drafted tokens (fewer near the end of the context window), each accepted with probability AcceptRate as long as all
// before it were (so accepted lengths follow a truncated geometric distribution). The
// zero value disables it.
type Speculation struct {
	DraftTokens int
	AcceptRate  float64
}

// Profile describes one simulated deployment: an engine, a model and a GPU. Every number
// is documented where the profile is defined, with where it comes from.
type Profile struct {
	Name        string
	Description string // one paragraph: what it models and where the numbers come from
	Model       string // served model name, as /v1/models reports it

	MaxModelLen      int // longest prompt + output accepted
	MaxNumSeqs       int // sequences in the running batch at most (vLLM max-num-seqs)
	MaxBatchedTokens int // token budget of one step (chunked prefill)
	BlockSize        int // KV cache block (page) size in tokens
	NumBlocks        int // KV cache capacity in blocks
	Vocab            int // token ids accepted in token-id prompts are in [0, Vocab)

	Timing      Timing
	Speculation Speculation

	// APILatency is the time a request spends in the API server before it reaches the
	// scheduler (tokenisation, templating, queue hops). It delays the request but costs
	// no engine time, so it shifts TTFT without changing throughput.
	APILatency time.Duration

	// PrefixCaching lets prompts that share full KV blocks with earlier prompts skip
	// their prefill, as vLLM's automatic prefix caching does.
	PrefixCaching bool

	// PriorityScheduling makes the SGLang flavor export its metrics as SGLang does with
	// --enable-priority-scheduling (observability/metrics_collector.py): the scheduler's
	// metrics carry a priority label, the total under priority="", and the running and
	// queued requests also a breakdown by request priority in the same family. The
	// simulator schedules first come, first served and gives every request priority 0.
	// No effect on the vLLM flavor.
	PriorityScheduling bool

	// LongPrefillTokenThreshold is vLLM's --long-prefill-token-threshold: a request's
	// prefill takes at most this many tokens of a step, running or newly scheduled
	// (vllm/v1/core/sched/scheduler.py, Scheduler.schedule: "if 0 <
	// long_prefill_token_threshold < num_new_tokens"), which leaves the rest of the
	// step's budget to the requests behind a long prompt. 0: off, as vLLM's default with
	// one partial prefill at a time.
	LongPrefillTokenThreshold int
}

// KVCapacity returns the KV cache size in tokens.
func (p Profile) KVCapacity() int { return p.NumBlocks * p.BlockSize }

// Validate reports the first inconsistent setting of p.
func (p Profile) Validate() error {
	switch {
	case p.Name == "" || p.Model == "":
		return fmt.Errorf("enginesim: profile needs a name and a model")
	case p.MaxModelLen <= 0, p.MaxNumSeqs <= 0, p.MaxBatchedTokens <= 0, p.BlockSize <= 0, p.NumBlocks <= 0, p.Vocab <= 0, p.LongPrefillTokenThreshold < 0:
		return fmt.Errorf("enginesim: profile %s: sizes must be positive", p.Name)
	case p.MaxModelLen > p.KVCapacity():
		return fmt.Errorf("enginesim: profile %s: max model length %d exceeds KV capacity %d", p.Name, p.MaxModelLen, p.KVCapacity())
	case p.MaxBatchedTokens <= p.Speculation.DraftTokens:
		return fmt.Errorf("enginesim: profile %s: step budget %d cannot hold one speculative decode", p.Name, p.MaxBatchedTokens)
	case !(p.Speculation.AcceptRate >= 0 && p.Speculation.AcceptRate <= 1) || p.Speculation.DraftTokens < 0:
		return fmt.Errorf("enginesim: profile %s: speculation needs draft tokens >= 0 and accept rate in [0,1]", p.Name)
	case !p.Timing.valid():
		return fmt.Errorf("enginesim: profile %s: timing terms must be finite and non-negative", p.Name)
	}
	return nil
}

// profiles holds the built-in profiles by name.
var profiles = map[string]Profile{}

func register(p Profile) {
	if err := p.Validate(); err != nil {
		panic(err)
	}
	profiles[p.Name] = p
}

// LookupProfile returns the built-in profile called name.
func LookupProfile(name string) (Profile, error) {
	p, ok := profiles[name]
	if !ok {
		return Profile{}, fmt.Errorf("enginesim: unknown profile %q (have %v)", name, ProfileNames())
	}
	return p, nil
}

// ProfileNames lists the built-in profiles, sorted.
func ProfileNames() []string {
	names := make([]string, 0, len(profiles))
	for n := range profiles {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
