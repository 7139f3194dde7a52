package synth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/slogate/slogate/engine"
	"github.com/slogate/slogate/wire"
)

// SchemaVersion names the layout of Report's JSON (written and read by package report);
// it changes when a field changes meaning or goes away.
const SchemaVersion = "slogate.probe/v1"

// ErrGateFailed reports a run stopped before any load because a check of the functional
// gate failed (see Report.Gate).
var ErrGateFailed = errors.New("synth: the functional gate failed; no performance run")

// Report is the result of one probe run.
type Report struct {
	Schema   string   `json:"schema"`
	Workload Workload `json:"workload"`
	// Label names the run for comparisons (slogate probe --label): the recipe it tried,
	// "vllm-0.11 tp2 fp8" say. Empty: comparisons name it by its engine and start.
	Label      string `json:"label,omitempty"`
	Target     string `json:"target"`
	Model      string `json:"model"`
	Engine     string `json:"engine"`
	KVCapacity int    `json:"kv_capacity_tokens,omitempty"` // 0: unknown
	// EngineVersion and EngineFlags are how the engine was run, as far as it tells:
	// its version, and the settings it reports (vLLM's cache_config_info labels,
	// SGLang's server arguments from /get_server_info), by the engine's own names.
	EngineVersion string            `json:"engine_version,omitempty"`
	EngineFlags   map[string]string `json:"engine_flags,omitempty"`
	Started       time.Time         `json:"started"`
	Finished      time.Time         `json:"finished"`
	Gate          []Check           `json:"gate,omitempty"`
	Prompts       PromptKind        `json:"prompts"`
	Prefill       []Prefill         `json:"prefill,omitempty"`        // matrix: one request per context
	Reference     float64           `json:"reference_rate,omitempty"` // scan: requests/s the multiples apply to
	Cells         []Cell            `json:"cells"`
	// Knee is a scan's knee as its maker chose it (slogate calibrate, under the tier's
	// SLO); without it, package report finds a scan's knee by calibrate's rule with no
	// SLO.
	Knee *KneeMark `json:"knee,omitempty"`
}

// RedactedTarget returns Target with the password of any user information in it masked
// (as url.URL.Redacted does), the form in which a written or displayed report shows it;
// a Target that is not a URL with user information comes back unchanged.
func (r Report) RedactedTarget() string { return redactURL(r.Target) }

// KneeMark is a scan's knee as its maker chose it: the offered rate of the knee, or
// none when Rate is not positive (no rate was sustainable), and why.
type KneeMark struct {
	Rate float64 `json:"rate"` // offered requests/s; not positive: no knee
	Rule string  `json:"rule"` // why this rate, or why none
}

// Prefill is the single-request prefill speed at one context length, measured on the
// warm-up request of the context's row.
type Prefill struct {
	Context int     `json:"context"`
	TTFT    float64 `json:"ttft_s"`
	TokPerS float64 `json:"prompt_tok_per_s"`
	Failure string  `json:"failure,omitempty"`
}

// Progress is told about each cell as it finishes: how many are done of how many.
type Progress func(done, total int, c Cell)

// Options configure a probe run.
type Options struct {
	Progress Progress
	// Gate runs the functional gate first; a failed gate stops the run before any load.
	Gate bool
}

// Run runs workload w against t and returns its report. Without a model name, t takes
// the first the engine lists. The engine's KV capacity and kind are read from its
// metrics first (capacity decides which matrix cells are over capacity), then how it
// runs, its version and flags, as far as it tells (ReadEngine). Run stops
// early, with what it measured, when ctx ends.
func Run(ctx context.Context, t *Target, w Workload, opts Options) (Report, error) {
	if err := w.Validate(); err != nil {
		return Report{}, err
	}
	w = w.withDefaults()
	if t.Model == "" {
		if err := t.DiscoverModel(ctx); err != nil {
			return Report{}, err
		}
	}
	rep := Report{Schema: SchemaVersion, Workload: w, Target: t.BaseURL, Model: t.Model, Started: t.now()}
	e := t.ReadEngine(ctx)
	rep.Engine, rep.KVCapacity, rep.EngineVersion, rep.EngineFlags = e.Kind, e.KVCapacity, e.Version, e.Flags
	if opts.Gate {
		rep.Gate = t.RunGate(ctx)
		if !GatePassed(rep.Gate) {
			rep.Finished = t.now()
			if err := ctx.Err(); err != nil {
				return rep, err // the checks failed because the run was stopped
			}
			return rep, ErrGateFailed
		}
	}
	kind, err := t.PreparePrompts(ctx)
	if err != nil {
		rep.Finished = t.now()
		return rep, err
	}
	rep.Prompts = kind
	r := runner{t: t, w: w, opts: opts, rep: &rep}
	switch w.Kind {
	case Matrix:
		r.matrix(ctx)
	case Shapes:
		r.shapes(ctx)
	case Scan:
		r.scan(ctx)
	}
	rep.Finished = t.now()
	return rep, ctx.Err()
}

// EngineState is what a run reads of the engine before it loads it.
type EngineState struct {
	Kind       string            // "vllm", "sglang", or "auto" when its metrics did not say
	KVCapacity int               // KV cache size in tokens; 0: unknown
	Version    string            // "" when the engine does not say
	Flags      map[string]string // the settings it reports (engine.Info); nil: none
}

// ReadEngine reads the engine's kind and KV capacity from one scrape of its metrics,
// then its version and flags (engine.Scraper.Info), through t's transport, as the
// requests go (a custom one may dial where the default cannot), each read with a timeout
// of its own. What the engine does not tell, or fails to, is left out: ReadEngine never
// fails.
func (t *Target) ReadEngine(ctx context.Context) EngineState {
	scrape := &http.Client{Transport: t.client().Transport, Timeout: 10 * time.Second}
	sc := engine.NewScraper(engine.ScraperConfig{BaseURL: t.BaseURL, APIKey: t.APIKey, Timeout: 10 * time.Second, Client: scrape})
	snap := sc.Scrape(ctx)
	e := EngineState{Kind: snap.Kind.String()}
	if engine.Known(snap.KVCapacityTokens) {
		e.KVCapacity = int(snap.KVCapacityTokens)
	}
	info, _ := sc.Info(ctx)
	e.Version, e.Flags = info.Version, info.Flags
	return e
}

// runner carries one run's state.
type runner struct {
	t     *Target
	w     Workload
	opts  Options
	rep   *Report
	seeds seeds
	done  int
}

func (r *runner) total() int {
	switch r.w.Kind {
	case Matrix:
		return len(r.w.Contexts) * len(r.w.Concurrency)
	case Shapes:
		return len(r.w.Shapes) * len(r.w.Concurrency)
	}
	return len(r.w.Multiples)
}

func (r *runner) record(c Cell) {
	r.rep.Cells = append(r.rep.Cells, c)
	r.done++
	if r.opts.Progress != nil {
		r.opts.Progress(r.done, r.total(), c)
	}
}

// route is the generation route of the run: the workload's, else the target's.
func (r *runner) route() wire.Route {
	if route, err := ParseRoute(r.w.Route); err == nil && r.w.Route != "" {
		return route
	}
	return r.t.Route
}

// promptFor returns the prompt maker of a shape.
func (r *runner) promptFor(input, output int) func(uint64) prompt {
	return func(seed uint64) prompt {
		return prompt{route: r.route(), input: input, output: output, seed: seed, sharedPrefix: min(r.w.SharedPrefix, input), wordsPerToken: r.t.prompts.WordsPerToken}
	}
}

// matrix runs every context at every concurrency, measuring prefill on each row's
// warm-up and skipping what exceeds the KV cache or follows a failed cell.
func (r *runner) matrix(ctx context.Context) {
	for _, ctxLen := range r.w.Contexts {
		input := ctxLen - r.w.Output
		if input < 1 {
			input = ctxLen
		}
		r.rep.Prefill = append(r.rep.Prefill, r.prefill(ctx, ctxLen, input))
		r.row(ctx, ContextLabel(ctxLen), input, r.w.Output)
	}
}

// prefill measures one request's TTFT at a context length.
func (r *runner) prefill(ctx context.Context, ctxLen, input int) Prefill {
	s := r.t.send(ctx, r.promptFor(input, 1)(r.seeds.next()), farFuture)
	p := Prefill{Context: ctxLen}
	if s.Res.TTFT <= 0 || s.Failure != NoFailure {
		p.Failure = s.Failure.String()
		return p
	}
	p.TTFT = s.Res.TTFT.Seconds()
	p.TokPerS = float64(input) / p.TTFT
	return p
}

// shapes runs each shape as a row.
func (r *runner) shapes(ctx context.Context) {
	for _, s := range r.w.Shapes {
		r.row(ctx, s.Name, s.Input, s.Output)
	}
}

// row runs one row at growing concurrency with staged protection.
func (r *runner) row(ctx context.Context, name string, input, output int) {
	stopped := false
	for _, conc := range r.w.Concurrency {
		c := Cell{Row: name, Input: input, Output: output, Concurrency: conc}
		switch {
		case ctx.Err() != nil:
			return
		case r.rep.KVCapacity > 0 && conc*(input+output) > r.rep.KVCapacity:
			c.State = OverCapacity
			c.Detail = fmt.Sprintf("%d x %d tokens > KV capacity %d", conc, input+output, r.rep.KVCapacity)
		case stopped:
			c.State, c.Detail = Skipped, "a smaller cell of this row failed"
		default:
			r.closedCell(ctx, &c)
			stopped = c.State.stops()
		}
		r.record(c)
	}
}

// closedCell warms up and runs a closed-loop cell's rounds.
func (r *runner) closedCell(ctx context.Context, c *Cell) {
	warm := r.promptFor(c.Input, min(c.Output, 16))
	r.t.closedLoop(ctx, c.Concurrency, warm, &r.seeds, 0, 1)
	mk := r.promptFor(c.Input, c.Output)
	for range r.w.Rounds {
		if ctx.Err() != nil {
			break
		}
		b := r.t.closedLoop(ctx, c.Concurrency, mk, &r.seeds, time.Duration(r.w.Duration), r.w.Requests)
		c.Rounds = append(c.Rounds, summarize(b))
	}
	c.finish(r.w.Agreement)
}

// scanWindow is the arrival window of a scan round: Duration, or the time Requests
// requests take at the reference rate.
func (r *runner) scanWindow(ref float64) time.Duration {
	if r.w.Duration > 0 || ref == 0 {
		return time.Duration(r.w.Duration)
	}
	return time.Duration(float64(r.w.Requests) / ref * float64(time.Second))
}

// scan measures the reference rate if it is not given, then offers open-loop arrivals
// at each multiple of it.
func (r *runner) scan(ctx context.Context) {
	s := r.w.Shapes[0]
	mk := r.promptFor(s.Input, s.Output)
	ref := r.w.ReferenceRate
	if ref == 0 {
		b := r.t.closedLoop(ctx, r.w.CalibrationConcurrency, mk, &r.seeds, time.Duration(r.w.Duration), r.w.Requests)
		if b.span > 0 {
			ref = float64(summarize(b).Completed) / b.span.Seconds()
		}
	}
	r.rep.Reference = ref
	window := r.scanWindow(ref)
	for i, m := range r.w.Multiples {
		c := Cell{Row: s.Name, Input: s.Input, Output: s.Output, Multiple: m, Nominal: m * ref, Rate: m * ref}
		for round := range r.w.Rounds {
			if ctx.Err() != nil || ref == 0 {
				break
			}
			offsets := arrivals(c.Nominal, window, r.w.Arrival == "poisson", uint64(i*100+round+1))
			b := r.t.openLoop(ctx, offsets, window, mk, &r.seeds, 10*time.Minute)
			c.Rounds = append(c.Rounds, summarize(b))
		}
		c.finish(r.w.Agreement)
		r.record(c)
	}
}
