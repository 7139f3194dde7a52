package measure

import (
	"time"

	"github.com/slogate/slogate/clock"
	"github.com/slogate/slogate/wire"
)

// Options configure a Recorder.
type Options struct {
	Clock    clock.Clock         // default clock.Real
	KeepGaps bool                // keep every gap in Result.Gaps (the prober does; the proxy need not)
	OnGap    func(time.Duration) // called with each gap as it is measured, if set
}

// Recorder measures one request. Create it when the request is dispatched to the engine,
// feed it the response, then call Finish once. It decodes what it is fed and never
// modifies or retains it. Not safe for concurrent use.
type Recorder struct {
	opts     Options
	res      Result
	last     time.Time // time of the last output chunk
	usage    wire.Usage
	hasUsage bool
	cached   int // prompt tokens from the prefix cache, reported beside the usage
	sofar    int // output bytes so far, of a stream whose chunks carry running totals
}

// NewRecorder starts measuring a request sent to route; the clock's current time is
// the dispatch time.
func NewRecorder(route wire.Route, stream bool, opts Options) *Recorder {
	opts.Clock = clock.Or(opts.Clock)
	r := &Recorder{opts: opts}
	r.res.Route, r.res.Stream = route, stream
	r.res.Start = opts.Clock.Now()
	return r
}

// Event records one server-sent event of a streaming response, read in the shape of
// the recorder's route (wire.ScanFor). Comments are ignored; [DONE] marks the stream as
// ended, and so does the terminal event of a Responses API stream, which has no [DONE];
// an error marks the answer as failed (see Chunk); data that is not an event of the
// route is ignored (the proxy forwards it regardless).
func (r *Recorder) Event(ev wire.Event) {
	if ev.Comment {
		return
	}
	if ev.IsDone() {
		r.Done()
		return
	}
	c, err := wire.ScanFor(r.res.Route, ev.Data)
	if err != nil {
		return
	}
	if c.IsError {
		r.ErrorData(ev.Data)
	}
	r.Chunk(c)
}

// ErrorData records the data of an error event, before Chunk records its summary: an
// engine's refusal at its admission caps (wire.APIError.Refusal) opening a stream,
// before any output, marks the request as refused (SGLang streams its refusal so).
// Callers that scan chunks themselves call it for every chunk whose summary IsError.
func (r *Recorder) ErrorData(data []byte) {
	if r.res.OutputChunks == 0 && wire.IsRefusal(data) {
		r.res.Refused = true
	}
}

// Done records the stream's end marker, [DONE].
func (r *Recorder) Done() { r.res.Ended = true }

// Chunk records one stream chunk, arriving now, as wire.ScanFor summarised it. Callers
// that scan chunks themselves use it instead of Event. An error (both engines end a
// generation that failed with an error object, then still send [DONE]; a Responses
// stream ends with response.failed; SGLang's /generate with an abort finish) carries no
// output; it makes Finish report EngineError in place of OK. A chunk with running
// totals (SGLang's /generate) carries output when its completion tokens (or, without
// counts, its text) grew.
func (r *Recorder) Chunk(c wire.ChunkSummary) {
	if c.End {
		r.res.Ended = true
	}
	if c.IsError {
		r.res.ErrorEvent = true
		return
	}
	if c.Cumulative {
		c.OutputBytes = r.growth(c)
	}
	r.chunk(c, r.opts.Clock.Now())
}

// growth returns how much new output a chunk with running totals carries: the tokens
// its completion count grew by, or else the bytes its text grew by.
func (r *Recorder) growth(c wire.ChunkSummary) int {
	if c.HasUsage {
		prev := 0
		if r.hasUsage {
			prev = r.usage.CompletionTokens
		}
		return max(c.Usage.CompletionTokens-prev, 0)
	}
	grew := max(c.OutputBytes-r.sofar, 0)
	r.sofar = max(r.sofar, c.OutputBytes)
	return grew
}

// Body records the complete body of a non-streaming response. A non-streaming answer
// arrives at once, so it has tokens and an E2E time but no TTFT or TPOT. An error object
// in place of the answer makes Finish report EngineError in place of OK.
func (r *Recorder) Body(body []byte) {
	r.res.Refused = wire.IsRefusal(body)
	c, err := wire.ScanFor(r.res.Route, body)
	if err != nil {
		return
	}
	if c.IsError {
		r.res.ErrorEvent = true
		return
	}
	r.res.Ended = true
	r.summary(c)
	if c.OutputBytes > 0 {
		r.res.OutputChunks = 1
	}
}

// summary keeps the usage and finish reason a chunk or response carries.
func (r *Recorder) summary(c wire.ChunkSummary) {
	if c.HasUsage {
		r.usage, r.hasUsage = c.Usage, true
	}
	if c.CachedTokens > 0 {
		r.cached = c.CachedTokens
	}
	if c.FinishReason != "" {
		r.res.FinishReason = c.FinishReason
	}
}

func (r *Recorder) chunk(c wire.ChunkSummary, now time.Time) {
	r.summary(c)
	if c.OutputBytes == 0 {
		return
	}
	if r.res.OutputChunks == 0 {
		r.res.TTFT = now.Sub(r.res.Start)
	} else {
		gap := now.Sub(r.last)
		r.res.MaxGap = max(r.res.MaxGap, gap)
		if r.opts.KeepGaps {
			r.res.Gaps = append(r.res.Gaps, gap)
		}
		if r.opts.OnGap != nil {
			r.opts.OnGap(gap)
		}
	}
	r.res.OutputChunks++
	r.last = now
}

// Refused reports whether the engine refused the request at its admission caps, as far
// as it has been fed (Result.Refused).
func (r *Recorder) Refused() bool { return r.res.Refused }

// Outputs reports how many output chunks have arrived so far, for callers that track
// live streams.
func (r *Recorder) Outputs() int { return r.res.OutputChunks }

// Finish ends the measurement at the clock's current time with the status the client
// got and how the request ended, and returns the Result. When the caller saw no other
// failure (outcome OK), an answer the engine refused at its admission caps is reported
// as Rejected, one that carried another error object as
// EngineError, whatever followed it, and a stream that began but did not end properly
// as AbortedMidstream.
func (r *Recorder) Finish(status int, outcome Outcome) Result {
	res := r.res
	res.Status, res.Outcome = status, outcome
	res.E2E = r.opts.Clock.Now().Sub(res.Start)
	switch {
	case outcome != OK:
	case res.Refused:
		res.Outcome = Rejected
	case res.ErrorEvent:
		res.Outcome = EngineError
	case res.Stream && res.OutputChunks > 0 && !res.Ended:
		res.Outcome = AbortedMidstream
	}
	switch {
	case r.hasUsage:
		res.InputTokens, res.OutputTokens, res.Tokens = r.usage.PromptTokens, r.usage.CompletionTokens, TokensUsage
		res.CachedTokens = r.cached
		if d := r.usage.PromptTokensDetails; d != nil {
			res.CachedTokens = d.CachedTokens
		}
	case res.OutputChunks > 0:
		res.OutputTokens, res.Tokens = res.OutputChunks, TokensChunks
	}
	if res.Stream && res.OutputTokens > 1 && res.OutputChunks > 0 {
		res.TPOT = (res.E2E - res.TTFT) / time.Duration(res.OutputTokens-1)
	}
	return res
}
