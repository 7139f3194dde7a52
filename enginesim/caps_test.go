package enginesim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/slogate/slogate/clock"
	"github.com/slogate/slogate/internal/conformance"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/wire"
)

// TestCapsConfig: a cap is 0 (off) or positive, and only the flavour that has it takes
// it.
func TestCapsConfig(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"none", Config{}, true},
		{"vLLM caps", Config{Flavor: FlavorVLLM, MaxNumQueuedReqs: 8, MaxNumQueuedTokens: 32000}, true},
		{"vLLM caps, flavour left to its default", Config{MaxNumQueuedReqs: 8}, true},
		{"SGLang cap", Config{Flavor: FlavorSGLang, MaxQueuedRequests: 8}, true},
		{"SGLang cap on vLLM", Config{Flavor: FlavorVLLM, MaxQueuedRequests: 8}, false},
		{"SGLang cap on the default flavour", Config{MaxQueuedRequests: 8}, false},
		{"vLLM request cap on SGLang", Config{Flavor: FlavorSGLang, MaxNumQueuedReqs: 8}, false},
		{"vLLM token cap on SGLang", Config{Flavor: FlavorSGLang, MaxNumQueuedTokens: 100}, false},
		{"negative request cap", Config{MaxNumQueuedReqs: -1}, false},
		{"negative token cap", Config{MaxNumQueuedTokens: -1}, false},
		{"negative SGLang cap", Config{Flavor: FlavorSGLang, MaxQueuedRequests: -1}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Profile = tinyProfile(t, nil)
			_, err := NewServer(tc.cfg)
			if tc.ok && err != nil || !tc.ok && !errors.Is(err, errCaps) {
				t.Errorf("NewServer: %v; want ok = %v", err, tc.ok)
			}
		})
	}
}

// frozenProfile is the tiny profile with one sequence at a time and steps of an hour:
// the first request runs and never gets a token, the rest wait, so the caps see a state
// that holds still while the test probes it.
func frozenProfile(t *testing.T) Profile {
	return tinyProfile(t, func(p *Profile) {
		p.MaxNumSeqs = 1
		p.Timing = Timing{StepBase: time.Hour.Seconds()}
	})
}

// hold starts a streamed completion of a prompt of n token ids and returns once the
// engine has answered its headers, that is once it has queued it; cancel ends it.
func (e *simEnv) hold(n, maxTokens int) (release func()) {
	e.t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprint(100 + i)
	}
	body := fmt.Sprintf(`{"model":%q,"prompt":[%s],"max_tokens":%d,"ignore_eos":true,"stream":true}`, tinyModel, strings.Join(ids, ","), maxTokens)
	ctx, cancel := context.WithCancel(context.Background())
	resp := e.post(ctx, "/v1/completions", body, nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream; charset=utf-8" {
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		e.t.Fatalf("held request %d %q: %s, want a 200 stream", resp.StatusCode, resp.Header.Get("Content-Type"), data)
	}
	return func() {
		cancel()
		resp.Body.Close()
	}
}

// probe is one request sent to a full engine, on a route, streamed or not.
type probe struct {
	path, body string
	route      wire.Route
	stream     bool
}

// probes returns a request of every generation route the flavour serves, streamed and
// not.
func probes(flavor Flavor) []probe {
	var out []probe
	for _, stream := range []bool{false, true} {
		out = append(out,
			probe{"/v1/completions", fmt.Sprintf(`{"model":%q,"prompt":"hi","max_tokens":4,"stream":%v}`, tinyModel, stream), wire.RouteCompletions, stream},
			probe{"/v1/chat/completions", fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}],"max_tokens":4,"stream":%v}`, tinyModel, stream), wire.RouteChatCompletions, stream},
		)
		if flavor == FlavorVLLM {
			out = append(out, probe{"/v1/responses", fmt.Sprintf(`{"model":%q,"input":"hi","max_output_tokens":4,"stream":%v}`, tinyModel, stream), wire.RouteResponses, stream})
		} else {
			out = append(out, probe{"/generate", fmt.Sprintf(`{"text":"hi","sampling_params":{"max_new_tokens":4},"stream":%v}`, stream), wire.RouteGenerate, stream})
		}
	}
	return out
}

// send sends p and returns the answer, failing the test when none comes in time: an
// engine that queued the probe instead of refusing it would never answer.
func (e *simEnv) send(p probe) (int, http.Header, []byte) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp := e.post(ctx, p.path, p.body, nil)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("POST %s: no answer, the engine did not refuse it: %v", p.path, err)
	}
	return resp.StatusCode, resp.Header, data
}

// corpusFile reads a file of the conformance corpus under wire/testdata.
func corpusFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(conformance.Dir(), "..", path))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// counts returns the value of every counter and the count of every histogram /metrics
// exports, by family and labels.
func (e *simEnv) counts() map[string]float64 {
	out := map[string]float64{}
	for name, f := range e.scrape() {
		for _, m := range f.GetMetric() {
			key := fmt.Sprint(name, labelMap(m))
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out[key] = m.GetCounter().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[key] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

// TestAdmissionCaps fills a frozen engine up to each cap with requests of known prompt
// lengths and checks that the next request is refused on every generation route,
// streamed or not, exactly as the engine answers it (the conformance corpus under
// wire/testdata: errors/ and streams/), without reaching the scheduler or any metric;
// and that a request is served again once one of those in flight has gone.
func TestAdmissionCaps(t *testing.T) {
	cases := []struct {
		name    string
		cfg     Config
		prompts []int  // the prompts of the requests the engine holds, all accepted
		refusal string // the corpus file of the refusal not streamed
	}{
		// vLLM: unfinished requests + 1 > max_num_queued_reqs; one runs, the rest wait.
		{"vLLM requests, 1", Config{Flavor: FlavorVLLM, MaxNumQueuedReqs: 1}, []int{10}, "vllm_queue_overflow.json"},
		{"vLLM requests, 3", Config{Flavor: FlavorVLLM, MaxNumQueuedReqs: 3}, []int{10, 10, 10}, "vllm_queue_overflow.json"},
		// vLLM: refused once the prompts not past prefill reach max_num_queued_tokens,
		// the new prompt not added: 0, 40 and 80 are under 120; 120 is not.
		{"vLLM tokens, at the cap", Config{Flavor: FlavorVLLM, MaxNumQueuedTokens: 120}, []int{40, 40, 40}, "vllm_max_queued_tokens.json"},
		{"vLLM tokens, one over", Config{Flavor: FlavorVLLM, MaxNumQueuedTokens: 121}, []int{40, 40, 40, 40}, "vllm_max_queued_tokens.json"},
		{"vLLM tokens, one prompt past the cap", Config{Flavor: FlavorVLLM, MaxNumQueuedTokens: 120}, []int{500}, "vllm_max_queued_tokens.json"},
		// Both: the request cap is checked first.
		{"vLLM both, requests first", Config{Flavor: FlavorVLLM, MaxNumQueuedReqs: 2, MaxNumQueuedTokens: 80}, []int{40, 40}, "vllm_queue_overflow.json"},
		{"vLLM both, tokens", Config{Flavor: FlavorVLLM, MaxNumQueuedReqs: 5, MaxNumQueuedTokens: 80}, []int{40, 40}, "vllm_max_queued_tokens.json"},
		// SGLang: waiting + 1 > max_queued_requests; the running request does not count.
		{"SGLang 1", Config{Flavor: FlavorSGLang, MaxQueuedRequests: 1}, []int{10, 10}, "sglang_queue_full.json"},
		{"SGLang 2", Config{Flavor: FlavorSGLang, MaxQueuedRequests: 2}, []int{10, 10, 10}, "sglang_queue_full.json"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Profile = frozenProfile(t)
			sim := startSim(t, tc.cfg)
			var held []func()
			defer func() {
				for _, c := range held {
					c()
				}
			}()
			for i, n := range tc.prompts {
				held = append(held, sim.hold(n, 4))
				sim.await(fmt.Sprintf("request %d to be queued", i+1), func() (bool, string) {
					st := sim.srv.Stats()
					return st.Running == 1 && st.Running+st.Waiting == i+1, fmt.Sprintf("%+v", st)
				})
			}
			before, stats := sim.counts(), sim.srv.Stats()
			for _, p := range probes(tc.cfg.Flavor) {
				status, h, body := sim.send(p)
				refused := tc.refusal
				switch {
				case tc.cfg.Flavor == FlavorSGLang && p.stream:
					if status != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") {
						t.Errorf("%s streamed: %d %q, want a 200 stream", p.path, status, h.Get("Content-Type"))
					}
					checkRefusalStream(t, p, body)
					continue
				case p.route == wire.RouteGenerate:
					refused = "sglang_generate_queue_full.json"
				}
				if want := corpusFile(t, filepath.Join("errors", refused)); status != http.StatusServiceUnavailable || !bytes.Equal(body, want) {
					t.Errorf("%s (stream %v): %d %s; want 503 %s", p.path, p.stream, status, body, want)
				}
				if ct := h.Get("Content-Type"); ct != "application/json" {
					t.Errorf("%s (stream %v): Content-Type %q", p.path, p.stream, ct)
				}
				if e := apiError(t, body); e.Message == "" {
					t.Errorf("%s: the refusal decodes without a message", p.path)
				}
			}
			if tc.cfg.Flavor == FlavorSGLang {
				checkRefusalUsage(t, sim)
			}
			if after := sim.srv.Stats(); after.Running != stats.Running || after.Waiting != stats.Waiting || after.finishedTotal() != stats.finishedTotal() {
				t.Errorf("the refused requests reached the scheduler: %+v, before %+v", after, stats)
			}
			if after := sim.counts(); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Errorf("a metric counted the refusals:\nbefore %v\nafter  %v", before, after)
			}
			// The last request held waits (or, alone, runs): once its client has gone, the
			// engine takes a request again.
			held[len(held)-1]()
			held = held[:len(held)-1]
			n := len(tc.prompts)
			sim.await("the last request to leave", func() (bool, string) {
				return sim.srv.inFlightNow() == n-1, fmt.Sprintf("%+v", sim.srv.Stats())
			})
			held = append(held, sim.hold(tc.prompts[n-1], 4))
			sim.await("the next request to be queued", func() (bool, string) {
				return sim.srv.inFlightNow() == n, fmt.Sprintf("%+v", sim.srv.Stats())
			})
		})
	}
}

// inFlightNow returns the requests the scheduler holds, waiting or running.
func (s *Server) inFlightNow() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sched.inFlight()
}

// checkRefusalStream checks SGLang's streamed refusal against the corpus: byte for byte
// on completions and chat (no usage asked), as measured on /generate, whose event
// carries the request's id and latency.
func checkRefusalStream(t *testing.T, p probe, body []byte) {
	t.Helper()
	file := "sglang_chat_queue_full.sse"
	if p.route == wire.RouteGenerate {
		file = "sglang_generate_queue_full.sse"
	} else if want := corpusFile(t, filepath.Join("streams", file)); !bytes.Equal(body, want) {
		t.Errorf("%s streamed: %q, want %q", p.path, body, want)
	}
	streams, err := conformance.Streams()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range streams {
		if s.Name != file {
			continue
		}
		rec := measure.NewRecorder(p.route, true, measure.Options{Clock: clock.NewFake(time.Unix(1_700_000_000, 0))})
		eachEvent(t, body, rec.Event)
		want := s.Expect
		want.Route = p.route.String()
		if got := conformance.Of(rec.Finish(http.StatusOK, measure.OK)); got != want {
			t.Errorf("%s streamed: measured %+v, want %+v", p.path, got, want)
		}
		return
	}
	t.Fatalf("the corpus has no %s", file)
}

// TestAdmissionCapsReopen: a cap that refuses a request takes one again once the engine
// has moved on: vLLM's token cap when the prompts held have been prefilled (their first
// tokens out, though they still decode), vLLM's request cap when the request held has
// finished, SGLang's when the request that waited runs (the one before it gone).
func TestAdmissionCapsReopen(t *testing.T) {
	fast := func(seqs int) Profile {
		return tinyProfile(t, func(p *Profile) {
			p.MaxNumSeqs = seqs
			p.Timing = Timing{StepBase: 0.002}
		})
	}
	completion := func(maxTokens int) probe {
		return probe{"/v1/completions", fmt.Sprintf(`{"model":%q,"prompt":[7,8,9],"max_tokens":%d,"ignore_eos":true}`, tinyModel, maxTokens), wire.RouteCompletions, false}
	}
	refused := func(t *testing.T, sim *simEnv, message string) {
		t.Helper()
		status, _, body := sim.send(completion(4))
		if e := apiError(t, body); status != http.StatusServiceUnavailable || e.Message != message {
			t.Fatalf("full engine: %d %s, want 503 %q", status, body, message)
		}
	}
	wake := func(t *testing.T, sim *simEnv) {
		t.Helper()
		if status, _, _ := sim.do(http.MethodPost, "/wake_up", "", nil); status != http.StatusOK {
			t.Fatalf("/wake_up: %d", status)
		}
	}
	sleep := func(t *testing.T, sim *simEnv) {
		t.Helper()
		if status, _, _ := sim.do(http.MethodPost, "/sleep?mode=keep", "", nil); status != http.StatusOK {
			t.Fatalf("/sleep: %d", status)
		}
	}

	t.Run("vLLM tokens, after prefill", func(t *testing.T) {
		sim := startSim(t, Config{Flavor: FlavorVLLM, Profile: fast(8), MaxNumQueuedTokens: 100})
		sleep(t, sim)
		a, b := sim.hold(60, 3000), sim.hold(60, 3000)
		defer a()
		defer b()
		refused(t, sim, vllmQueuedTokensMessage) // 120 tokens not prefilled
		wake(t, sim)
		sim.await("both prompts to be prefilled", func() (bool, string) {
			st := sim.srv.Stats()
			return st.PrefillBacklog == 0 && st.Running == 2, fmt.Sprintf("%+v", st)
		})
		defer sim.hold(60, 3000)()
		if n := sim.srv.inFlightNow(); n != 3 {
			t.Errorf("in flight %d, want 3", n)
		}
	})
	t.Run("vLLM requests, after a finish", func(t *testing.T) {
		sim := startSim(t, Config{Flavor: FlavorVLLM, Profile: fast(8), MaxNumQueuedReqs: 1})
		sleep(t, sim)
		answered := make(chan int, 1)
		go func() {
			status, _, _ := sim.send(completion(3))
			answered <- status
		}()
		sim.await("the request to be queued", func() (bool, string) {
			return sim.srv.inFlightNow() == 1, fmt.Sprintf("%+v", sim.srv.Stats())
		})
		refused(t, sim, vllmQueueOverflowMessage)
		wake(t, sim)
		if status := <-answered; status != http.StatusOK {
			t.Fatalf("the request held: %d", status)
		}
		if status, _, body := sim.send(completion(4)); status != http.StatusOK {
			t.Errorf("after the finish: %d %s, want 200", status, body)
		}
	})
	t.Run("SGLang, after the waiting request starts", func(t *testing.T) {
		sim := startSim(t, Config{Flavor: FlavorSGLang, Profile: fast(1), MaxQueuedRequests: 1})
		first := sim.hold(10, 2000) // runs for 2000 steps
		defer first()
		sim.await("the first request to run", func() (bool, string) {
			st := sim.srv.Stats()
			return st.Running == 1, fmt.Sprintf("%+v", st)
		})
		second := sim.hold(10, 5) // waits behind it
		defer second()
		sim.await("the second request to wait", func() (bool, string) {
			st := sim.srv.Stats()
			return st.Waiting == 1, fmt.Sprintf("%+v", st)
		})
		status, _, body := sim.send(completion(4))
		if status != http.StatusServiceUnavailable || !bytes.Equal(body, corpusFile(t, "errors/sglang_queue_full.json")) {
			t.Fatalf("queue full: %d %s, want SGLang's 503", status, body)
		}
		first() // the second starts running; the queue is empty
		sim.await("the second request to run", func() (bool, string) {
			st := sim.srv.Stats()
			return st.Waiting == 0 && st.Running == 1, fmt.Sprintf("%+v", st)
		})
		defer sim.hold(10, 5)()
		sim.await("the third request to wait", func() (bool, string) {
			st := sim.srv.Stats()
			return st.Waiting == 1, fmt.Sprintf("%+v", st)
		})
	})
}

// checkRefusalUsage: with include_usage, SGLang's streamed refusal carries a usage chunk
// after the error, all zeros (the abort's meta_info has no token counts), then [DONE].
func checkRefusalUsage(t *testing.T, sim *simEnv) {
	t.Helper()
	status, _, body := sim.send(probe{"/v1/chat/completions", fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`, tinyModel), wire.RouteChatCompletions, true})
	var kinds []string
	eachEvent(t, body, func(ev wire.Event) {
		if ev.IsDone() {
			kinds = append(kinds, "done")
			return
		}
		if e, err := wire.DecodeError(ev.Data); err == nil && e.Message == sglangQueueFullMessage && e.Code == 503 {
			kinds = append(kinds, "error")
			return
		}
		c, err := wire.DecodeChunk(ev.Data)
		if err != nil || !c.UsageOnly() || *c.Usage != (wire.Usage{}) {
			t.Errorf("event %s: want the usage chunk of zeros (%v)", ev.Data, err)
		}
		kinds = append(kinds, "usage")
	})
	if status != http.StatusOK || strings.Join(kinds, " ") != "error usage done" {
		t.Errorf("streamed refusal with include_usage: %d, events %v; want 200, error usage done", status, kinds)
	}
}

// eachEvent calls fn with every server-sent event of body, failing the test if it does
// not read as an event stream.
func eachEvent(t *testing.T, body []byte, fn func(wire.Event)) {
	t.Helper()
	r := wire.NewSSEReader(bytes.NewReader(body), wire.DefaultMaxEvent)
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatalf("reading the stream %q: %v", body, err)
		}
		fn(ev)
	}
}
