// Package soak drives a long, highly concurrent and deliberately untidy load through
// slogate's proxy, and judges from samples of a process's goroutines, open files, heap
// and resident memory whether they stayed flat.
//
// The load is a mix of client behaviours (Kind): streaming completions and chat,
// non-streaming requests, clients that cancel mid-stream, after the response headers
// before the first token, or while their request waits in admission's queue, malformed
// requests (400), oversized bodies (413) and passthrough requests; during fault phases
// some requests also ask the engine simulator for a fault (enginesim's X-Enginesim
// header). Every request's end is classified on the client side (Outcome) and tallied,
// together with whether slogate is certain to have counted it, so that the tally can be
// checked against slogate_requests_total.
//
// bench/soak.sh runs it for ten minutes against `slogate serve` (through bench/soak/driver);
// cmd/slogate's TestAcceptanceSoak runs it for a minute in-process.
package soak

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/slogate/slogate/enginesim"
)

// Kind is one behaviour of a client in the mix.
type Kind uint8

// The kinds of request the mix sends.
const (
	StreamCompletion Kind = iota // a streaming completion, read to [DONE]
	StreamChat                   // a streaming chat completion, read to [DONE]
	Whole                        // a non-streaming completion or chat, read whole
	CancelMidstream              // a stream the client abandons after a few events
	CancelFirstToken             // a stream the client abandons once the headers arrive, before reading a token
	CancelWaiting                // abandoned shortly after slogate read it: while queued, or before the engine answers
	Malformed                    // an invalid body: 400, from slogate or from the engine
	Oversized                    // a body over slogate's --max-body-bytes: 413
	Passthrough                  // GET /v1/models: forwarded, not an inference request
	numKinds
)

var kindNames = [numKinds]string{
	"stream_completion", "stream_chat", "whole", "cancel_midstream", "cancel_first_token",
	"cancel_waiting", "malformed", "oversized", "passthrough",
}

// String returns the kind's name, e.g. "cancel_midstream".
func (k Kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return "unknown"
}

// Kinds lists every kind.
func Kinds() []Kind {
	out := make([]Kind, numKinds)
	for i := range out {
		out[i] = Kind(i)
	}
	return out
}

// weights is the mix: the share (in percent) of each kind among all requests.
var weights = [numKinds]int{
	StreamCompletion: 30, StreamChat: 24, Whole: 15, CancelMidstream: 9, CancelFirstToken: 5,
	CancelWaiting: 6, Malformed: 6, Oversized: 3, Passthrough: 2,
}

// pick draws a kind from the mix.
func pick(rng *rand.Rand) Kind {
	n := rng.IntN(100)
	for k, w := range weights {
		if n < w {
			return Kind(k)
		}
		n -= w
	}
	return StreamCompletion
}

// Fault is an engine fault a request asks the simulator for.
type Fault uint8

// The faults of a fault phase. Every one is something a real engine does.
const (
	NoFault     Fault = iota
	Status500         // the engine answers 500
	Status503         // the engine answers 503
	DropStream        // the engine closes the connection mid-stream
	StallStream       // the engine stops sending mid-stream, keeping the connection open
	SlowHeaders       // the engine answers after slogate's upstream timeout: 504
	numFaults
)

// header returns the X-Enginesim directives of f; delay is the SlowHeaders delay.
func (f Fault) header(rng *rand.Rand, delay time.Duration) string {
	switch f {
	case Status500:
		return "status=500"
	case Status503:
		return "status=503"
	case DropStream:
		return fmt.Sprintf("drop_after=%d", 1+rng.IntN(8))
	case StallStream:
		return fmt.Sprintf("stall_after=%d", 1+rng.IntN(8))
	case SlowHeaders:
		return "delay=" + delay.String()
	}
	return ""
}

// streams reports whether the fault only shows on a streaming response.
func (f Fault) streams() bool { return f == DropStream || f == StallStream }

// engineStatus reports whether the fault makes the client get a 5xx status.
func (f Fault) engineStatus() bool { return f == Status500 || f == Status503 || f == SlowHeaders }

// request is one request of the mix, ready to send.
type request struct {
	kind   Kind
	fault  Fault
	faults string // the fault's X-Enginesim directives
	method string
	path   string
	body   []byte
	batch  bool // sent with X-Slogate-Priority: batch
	events int  // CancelMidstream: events read before cancelling
	wait   time.Duration
}

// faultHeader is the simulator's fault header.
const faultHeader = enginesim.FaultHeader

// build draws the details of a request of kind k; fault is the fault it carries (the
// caller chose it for a kind that can show it).
func (m *mix) build(rng *rand.Rand, k Kind, fault Fault) request {
	r := request{kind: k, fault: fault, method: "POST", path: "/v1/completions", batch: rng.IntN(5) == 0}
	r.faults = fault.header(rng, m.cfg.SlowHeaders)
	long := rng.IntN(10) == 0 // a prompt of the long tier
	switch k {
	case StreamCompletion, CancelMidstream, CancelFirstToken, CancelWaiting:
		r.body = m.completion(rng, long, true, 16+rng.IntN(m.cfg.MaxTokens-15))
	case StreamChat:
		r.path, r.body = "/v1/chat/completions", m.chat(rng, long, true, 16+rng.IntN(m.cfg.MaxTokens-15))
	case Whole:
		n := 4 + rng.IntN(m.cfg.WholeTokens-3)
		if rng.IntN(2) == 0 {
			r.path, r.body = "/v1/chat/completions", m.chat(rng, long, false, n)
		} else {
			r.body = m.completion(rng, long, false, n)
		}
	case Malformed:
		r.body = []byte(malformed[rng.IntN(len(malformed))])
		if rng.IntN(2) == 0 {
			r.path = "/v1/chat/completions"
		}
	case Oversized:
		r.body = m.oversized
	case Passthrough:
		r.method, r.path, r.body = "GET", "/v1/models", nil
	}
	if k == CancelMidstream {
		r.events = 1 + rng.IntN(8)
	}
	if k == CancelWaiting {
		r.wait = time.Duration(rng.Int64N(int64(300 * time.Millisecond)))
	}
	return r
}

// malformed are invalid request bodies: the first five slogate refuses itself, the last
// two pass its inspection and the engine refuses them.
var malformed = []string{
	`{"prompt": "unterminated`,
	`[1, 2, 3]`,
	`{"max_tokens": 16}`,
	`{"prompt": "x", "messages": 3, "max_tokens": -4}`,
	`{"prompt": "x", "stream": "yes"}`,
	`{"prompt": "x", "n": 2, "max_tokens": 4}`,
	`{"model": "no-such-model", "prompt": "x", "messages": [{"role": "user", "content": "x"}], "max_tokens": 4}`,
}

func (m *mix) completion(rng *rand.Rand, long, stream bool, maxTokens int) []byte {
	usage := ""
	if stream && rng.IntN(2) == 0 {
		usage = `,"stream_options":{"include_usage":true}`
	}
	return fmt.Appendf(nil, `{"model":%q,"prompt":%q,"max_tokens":%d,"ignore_eos":true,"stream":%t%s}`,
		m.cfg.Model, m.prompt(rng, long), maxTokens, stream, usage)
}

func (m *mix) chat(rng *rand.Rand, long, stream bool, maxTokens int) []byte {
	return fmt.Appendf(nil, `{"model":%q,"messages":[{"role":"system","content":"You answer briefly."},{"role":"user","content":%q}],"max_tokens":%d,"ignore_eos":true,"stream":%t}`,
		m.cfg.Model, m.prompt(rng, long), maxTokens, stream)
}

// prompt returns text of about 30-400 tokens, or 1,200-2,400 for the long tier (four
// bytes a token, as slogate estimates text).
func (m *mix) prompt(rng *rand.Rand, long bool) string {
	words := 30 + rng.IntN(370)
	if long {
		words = 1200 + rng.IntN(1200)
	}
	var b strings.Builder
	b.Grow(words * 4)
	for i := range words {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(vocabulary[rng.IntN(len(vocabulary))])
	}
	return b.String()
}

var vocabulary = strings.Fields("the cat sat on mat and ran far to see sun set over sea as it got dark out")

// oversizedBody returns a completions body of limit plus a few KiB.
func oversizedBody(limit int64) []byte {
	pad := strings.Repeat("a", int(limit)+4<<10)
	return fmt.Appendf(nil, `{"prompt":%q,"max_tokens":4}`, pad)
}
