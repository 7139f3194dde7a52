package synth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/slogate/slogate/clock"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/wire"
)

// ProbeClass is the priority class probe requests carry (admission's probe class), so a
// sidecar in front of the engine admits them only from headroom and keeps them out of
// its live SLO metrics.
const ProbeClass = "probe"

// Target is the engine a probe runs against.
type Target struct {
	BaseURL string       // the engine's (or a slogate sidecar's) base URL
	Model   string       // the served model name
	APIKey  string       // bearer token, if the engine wants one
	Header  http.Header  // more headers on every request (the sidecar's probe key); may be nil
	Client  *http.Client // default: a client with room for many idle connections
	Clock   clock.Clock  // default clock.Real
	// Timeout bounds each request, so a stalled engine cannot hang a probe; default
	// DefaultRequestTimeout.
	Timeout time.Duration
	// Route is the generation route probes use (see ParseRoute): RouteCompletions (the
	// default, also for RouteUnknown), RouteChatCompletions, RouteResponses (vLLM) or
	// RouteGenerate (SGLang). A workload's route overrides it for its run.
	Route wire.Route

	prompts PromptKind // how prompts are written (PreparePrompts)
	seeds   seeds      // request seeds, unique over the target's life
}

// addHeader adds t.Header to h.
func (t *Target) addHeader(h http.Header) {
	for k, vs := range t.Header {
		for _, v := range vs {
			h.Add(k, v)
		}
	}
}

// DefaultRequestTimeout bounds one probe request unless Target.Timeout says otherwise:
// long enough for a 256K-token prefill and thousands of output tokens on a busy engine.
const DefaultRequestTimeout = 10 * time.Minute

// probeClient is the default client: a closed loop of many streams keeps as many
// connections, which the default transport's two idle connections per host would not.
var probeClient = &http.Client{Transport: &http.Transport{
	Proxy: http.ProxyFromEnvironment, MaxIdleConns: 4096, MaxIdleConnsPerHost: 4096,
	IdleConnTimeout: 90 * time.Second, DisableCompression: true,
}}

// Failure says why a request did not succeed. Its String form is a bounded label value.
type Failure uint8

// The failures, in the order the success rules check them (those of the published
// H20-3e rate scan, docs/simulator.md, and an error reported in the stream: HTTP
// success, no error in the answer, non-empty output, the end marker, valid usage, exact
// output length).
const (
	NoFailure   Failure = iota
	Transport           // no HTTP answer, or the stream broke off
	HTTPStatus          // an answer other than 200
	EngineError         // the engine reported an error inside the stream (measure.EngineError)
	EmptyOutput         // no output at all
	NoEndMarker         // the stream ended without [DONE]
	BadUsage            // no usage report, or one without prompt or completion tokens
	WrongLength         // the completion tokens differ from the target
	Cut                 // still running when its round's window closed (not a failure of the engine)
	numFailures
)

var failureNames = [numFailures]string{"none", "transport", "http_status", "engine_error", "empty_output", "no_end_marker", "bad_usage", "wrong_length", "cut"}

func (f Failure) String() string {
	if f < numFailures {
		return failureNames[f]
	}
	return "unknown"
}

// Sample is one probe request, measured.
type Sample struct {
	Res          measure.Result
	Status       int
	Failure      Failure
	Looped       bool
	WindowTokens int // output tokens received before the round's window closed
	Text         string
}

// Success reports whether the sample met every success rule.
func (s Sample) Success() bool { return s.Failure == NoFailure }

// send runs one streaming request for p and measures it. Tokens received after
// windowEnd do not count in WindowTokens; a request still running when ctx ends is Cut.
func (t *Target) send(ctx context.Context, p prompt, windowEnd time.Time) Sample {
	timeout := t.Timeout
	if timeout <= 0 {
		timeout = DefaultRequestTimeout
	}
	reqCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	model, _ := json.Marshal(t.Model)
	body := p.appendBody(nil, model)
	req, err := http.NewRequestWithContext(reqCtx, http.MethodPost, strings.TrimRight(t.BaseURL, "/")+routePath(p.route), bytes.NewReader(body))
	if err != nil {
		return Sample{Failure: Transport}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Slogate-Priority", ProbeClass)
	t.addHeader(req.Header)
	if t.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+t.APIKey)
	}
	rec := measure.NewRecorder(p.probeRoute(), true, measure.Options{Clock: t.Clock, KeepGaps: true})
	resp, err := t.client().Do(req)
	if err != nil {
		return t.fail(ctx, rec, 0, Transport)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return t.fail(ctx, rec, resp.StatusCode, HTTPStatus)
	}
	s := t.read(resp.Body, p.probeRoute(), rec, windowEnd)
	s.Status = resp.StatusCode
	switch {
	case ctx.Err() != nil && !s.Res.Ended:
		s.Failure = Cut // the round's window closed on it
	case s.Failure != NoFailure:
	default:
		s.Failure = judge(s, p.output)
	}
	s.Looped = Looped(s.Text)
	return s
}

func (t *Target) fail(ctx context.Context, rec *measure.Recorder, status int, f Failure) Sample {
	if ctx.Err() != nil {
		f = Cut
	}
	return Sample{Res: rec.Finish(status, measure.UpstreamError), Status: status, Failure: f}
}

// read consumes a stream of route, feeding the recorder and collecting the text.
func (t *Target) read(body io.Reader, route wire.Route, rec *measure.Recorder, windowEnd time.Time) Sample {
	var text strings.Builder
	var s Sample
	done := false // [DONE] (or a Responses stream's terminal event) has arrived
	r := wire.NewSSEReader(body, wire.DefaultMaxEvent)
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil && done {
			// The answer was complete at [DONE]; what broke was only the wait for the
			// body's end (the round's window may close in between).
			break
		}
		if err != nil {
			s.Res = rec.Finish(http.StatusOK, measure.AbortedMidstream)
			s.Failure, s.Text = Transport, text.String()
			return s
		}
		rec.Event(ev)
		if ev.IsDone() {
			done = true
		}
		if ev.Comment || ev.IsDone() {
			continue
		}
		if c, err := wire.ScanFor(route, ev.Data); err == nil && c.End {
			done = true
		}
		e, ok := readEvent(route, ev.Data)
		if !ok {
			continue
		}
		if e.replace && e.text != "" {
			text.Reset()
		}
		text.WriteString(e.text)
		if e.counted && !t.now().After(windowEnd) {
			s.WindowTokens = e.tokens
		}
	}
	s.Res = rec.Finish(http.StatusOK, measure.OK)
	s.Text = text.String()
	return s
}

// probeRoute is the route p is sent to: completions unless it names another.
func (p prompt) probeRoute() wire.Route {
	if p.route == wire.RouteUnknown {
		return wire.RouteCompletions
	}
	return p.route
}

// judge applies the success rules to a stream that ended.
func judge(s Sample, target int) Failure {
	switch {
	case s.Res.ErrorEvent:
		return EngineError
	case s.Res.OutputChunks == 0:
		return EmptyOutput
	case !s.Res.Ended:
		return NoEndMarker
	case s.Res.Tokens != measure.TokensUsage || s.Res.InputTokens <= 0 || s.Res.OutputTokens <= 0:
		return BadUsage
	case s.Res.OutputTokens != target:
		return WrongLength
	}
	return NoFailure
}

func (t *Target) client() *http.Client {
	if t.Client != nil {
		return t.Client
	}
	return probeClient
}

func (t *Target) now() time.Time {
	if t.Clock != nil {
		return t.Clock.Now()
	}
	return time.Now()
}

// String describes the target for reports, with Redacted's URL.
func (t *Target) String() string { return fmt.Sprintf("%s (model %s)", t.Redacted(), t.Model) }

// Redacted returns the base URL with the password of any user information in it
// masked: the form in which reports, logs and errors may show it.
func (t *Target) Redacted() string { return redactURL(t.BaseURL) }

// redactURL hides the password of a URL with user information; other strings come back
// unchanged.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	return u.Redacted()
}

// farFuture is a window end that no request reaches.
var farFuture = time.Unix(1<<40, 0)
