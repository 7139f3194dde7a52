package wire

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

// ev is a copied, comparable Event.
type ev struct {
	Name, ID, Data string
	Comment        bool
	Raw            string
}

func copyEvent(e Event) ev {
	return ev{Name: e.Name, ID: e.ID, Data: string(e.Data), Comment: e.Comment, Raw: string(e.Raw)}
}

// parseChunks feeds chunks to a new parser and returns the events, the
// pending bytes and the first error.
func parseChunks(max int, chunks ...[]byte) (events []ev, pending string, err error) {
	p := NewSSEParser(max)
	for _, c := range chunks {
		err = p.Feed(c, func(e Event) error {
			events = append(events, copyEvent(e))
			return nil
		})
		if err != nil {
			break
		}
	}
	return events, string(p.Pending()), err
}

// readAll reads every event of r and returns them, the pending bytes and the
// final error.
func readAll(r io.Reader, max int) (events []ev, pending string, err error) {
	sr := NewSSEReader(r, max)
	for {
		e, err := sr.Next()
		if err != nil {
			return events, string(sr.Pending()), err
		}
		events = append(events, copyEvent(e))
	}
}

func bytewise(s []byte) [][]byte {
	out := make([][]byte, len(s))
	for i := range s {
		out[i] = s[i : i+1]
	}
	return out
}

// normalize returns the events without Raw, and the Raws followed by the
// pending bytes, with the one split-dependent boundary undone: a "\n" that
// starts a Raw right after a Raw ending in "\r" moves back to that Raw.
func normalize(events []ev, pending string) (fields []ev, raws []string) {
	for _, e := range events {
		raws = append(raws, e.Raw)
		e.Raw = ""
		fields = append(fields, e)
	}
	raws = append(raws, pending)
	prev := -1
	for i := range raws {
		if raws[i] == "" {
			continue
		}
		if prev >= 0 && strings.HasSuffix(raws[prev], "\r") && strings.HasPrefix(raws[i], "\n") {
			raws[prev] += "\n"
			raws[i] = raws[i][1:]
		}
		if raws[i] != "" {
			prev = i
		}
	}
	return fields, raws
}

// checkLossless checks that the Raws and the pending bytes reproduce input.
func checkLossless(t *testing.T, input []byte, events []ev, pending string) {
	t.Helper()
	var b strings.Builder
	for _, e := range events {
		b.WriteString(e.Raw)
	}
	b.WriteString(pending)
	if b.String() != string(input) {
		t.Fatalf("Raws + Pending = %q\nwant input      %q", b.String(), input)
	}
}

func checkSame(t *testing.T, what string, wantEvents []ev, wantPending string, gotEvents []ev, gotPending string) {
	t.Helper()
	wf, wr := normalize(wantEvents, wantPending)
	gf, gr := normalize(gotEvents, gotPending)
	if !slices.Equal(wf, gf) {
		t.Fatalf("%s: events differ\n got  %+v\n want %+v", what, gf, wf)
	}
	if !slices.Equal(wr, gr) {
		t.Fatalf("%s: raw boundaries differ\n got  %q\n want %q", what, gr, wr)
	}
}

func TestSSEParser(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []ev
		pending string
	}{
		{"vLLM stream", "data: {\"a\":1}\n\ndata: [DONE]\n\n", []ev{
			{Data: `{"a":1}`, Raw: "data: {\"a\":1}\n\n"},
			{Data: "[DONE]", Raw: "data: [DONE]\n\n"},
		}, ""},
		{"CRLF", "data: x\r\n\r\ndata: y\r\n\r\n", []ev{
			{Data: "x", Raw: "data: x\r\n\r\n"}, {Data: "y", Raw: "data: y\r\n\r\n"},
		}, ""},
		{"CR", "data: x\r\rdata: y\r\r", []ev{
			{Data: "x", Raw: "data: x\r\r"}, {Data: "y", Raw: "data: y\r\r"},
		}, ""},
		{"mixed endings", "data: a\rdata: b\r\ndata: c\n\r\n", []ev{
			{Data: "a\nb\nc", Raw: "data: a\rdata: b\r\ndata: c\n\r\n"},
		}, ""},
		{"multi-line data", "data: a\ndata:b\ndata:  c\ndata\n\n", []ev{
			{Data: "a\nb\n c\n", Raw: "data: a\ndata:b\ndata:  c\ndata\n\n"},
		}, ""},
		{"empty data dispatches", "data:\n\n", []ev{{Data: "", Raw: "data:\n\n"}}, ""},
		{"event and id", "event: add\nid: 7\ndata: 1\n\ndata: 2\n\n", []ev{
			{Name: "add", ID: "7", Data: "1", Raw: "event: add\nid: 7\ndata: 1\n\n"},
			{ID: "7", Data: "2", Raw: "data: 2\n\n"},
		}, ""},
		{"id with NUL ignored, empty id resets", "id: 1\ndata: a\n\nid: x\x00y\ndata: b\n\nid\ndata: c\n\n", []ev{
			{ID: "1", Data: "a", Raw: "id: 1\ndata: a\n\n"},
			{ID: "1", Data: "b", Raw: "id: x\x00y\ndata: b\n\n"},
			{ID: "", Data: "c", Raw: "id\ndata: c\n\n"},
		}, ""},
		{"named event without data", "event: ping\n\n", []ev{{Name: "ping", Raw: "event: ping\n\n"}}, ""},
		{"block without data or name is carried", "id: 3\nretry: 10\nfoo: bar\n\n\ndata: x\n\n", []ev{
			{ID: "3", Data: "x", Raw: "id: 3\nretry: 10\nfoo: bar\n\n\ndata: x\n\n"},
		}, ""},
		{"comment between events", ": ping\n\ndata: x\n\n:\n", []ev{
			{Comment: true, Data: "ping", Raw: ": ping\n"},
			{Data: "x", Raw: "\ndata: x\n\n"},
			{Comment: true, Data: "", Raw: ":\n"},
		}, ""},
		{"comment inside an event", "data: a\n:  c\ndata: b\n\n", []ev{
			{Comment: true, Data: " c"},
			{Data: "a\nb", Raw: "data: a\n:  c\ndata: b\n\n"},
		}, ""},
		{"comment after a block without data", "id: 1\n\n: hi\n", []ev{
			{Comment: true, Data: "hi", Raw: "id: 1\n\n: hi\n"},
		}, ""},
		{"BOM is skipped but kept", "\xef\xbb\xbfdata: x\n\n", []ev{{Data: "x", Raw: "\xef\xbb\xbfdata: x\n\n"}}, ""},
		{"BOM only at the start", "data: x\n\n\xef\xbb\xbfdata: y\n\n", []ev{{Data: "x", Raw: "data: x\n\n"}}, "\xef\xbb\xbfdata: y\n\n"},
		{"incomplete event", "data: x\n\ndata: y\n", []ev{{Data: "x", Raw: "data: x\n\n"}}, "data: y\n"},
		{"incomplete line", "data: x", nil, "data: x"},
		{"blank lines only", "\n\r\n\r", nil, "\n\r\n\r"},
		{"JSON with colons and spaces", "data: {\"k\": \"a: b\"}\n\n", []ev{
			{Data: `{"k": "a: b"}`, Raw: "data: {\"k\": \"a: b\"}\n\n"},
		}, ""},
		{"field names are case sensitive", "Data: x\nDATA: y\n\n", nil, "Data: x\nDATA: y\n\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, pending, err := parseChunks(0, []byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("events\n got  %+v\n want %+v", got, tt.want)
			}
			if pending != tt.pending {
				t.Errorf("Pending = %q, want %q", pending, tt.pending)
			}
			checkLossless(t, []byte(tt.in), got, pending)
		})
	}
}

func TestEventIsDone(t *testing.T) {
	tests := []struct {
		name string
		e    Event
		want bool
	}{
		{"done", Event{Data: []byte("[DONE]")}, true},
		{"chunk", Event{Data: []byte(`{"id":"x"}`)}, false},
		{"done with space", Event{Data: []byte(" [DONE]")}, false},
		{"comment", Event{Comment: true, Data: []byte("[DONE]")}, false},
	}
	for _, tt := range tests {
		if got := tt.e.IsDone(); got != tt.want {
			t.Errorf("%s: IsDone() = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// realisticStreams are streams as vLLM, SGLang and sse-starlette servers
// write them.
func realisticStreams() map[string][]byte {
	chunk := func(content string) string {
		return `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1735689600,"model":"m",` +
			`"choices":[{"index":0,"delta":{"content":"` + content + `"},"logprobs":null,"finish_reason":null}]}`
	}
	var vllm, starlette, cr strings.Builder
	for i, word := range []string{"", "Hello", ",", " world", "!"} {
		fmt.Fprintf(&vllm, "data: %s\n\n", chunk(word))
		fmt.Fprintf(&starlette, "event: message\r\nid: %d\r\ndata: %s\r\n\r\n: ping - 2025-01-01 00:00:0%d\r\n\r\n", i, chunk(word), i)
		fmt.Fprintf(&cr, "data: %s\rdata: %d\r\r", chunk(word), i)
	}
	vllm.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1735689600,"model":"m","choices":[],"usage":{"prompt_tokens":5,"total_tokens":10,"completion_tokens":5}}` + "\n\n")
	vllm.WriteString("data: [DONE]\n\n")
	starlette.WriteString("data: [DONE]\r\n\r\n")
	cr.WriteString("data: [DONE]\r\r")
	return map[string][]byte{
		"vllm":      []byte(vllm.String()),
		"starlette": []byte(starlette.String()),
		"cr":        []byte(cr.String()),
		"odd":       []byte("\xef\xbb\xbf: hi\r\n\r\ndata: a\r: mid\r\ndata: b\n\nid: 9\n\nevent: e\r\n\r\ndata: [DONE]\r\n\r\n\r\npartial"),
	}
}

func TestSSESplitEverywhere(t *testing.T) {
	for name, in := range realisticStreams() {
		t.Run(name, func(t *testing.T) {
			want, wantPending, err := parseChunks(0, in)
			if err != nil {
				t.Fatal(err)
			}
			if len(want) < 5 {
				t.Fatalf("only %d events in the fixture", len(want))
			}
			checkLossless(t, in, want, wantPending)
			for k := 0; k <= len(in); k++ {
				got, pending, err := parseChunks(0, in[:k], in[k:])
				if err != nil {
					t.Fatal(err)
				}
				checkLossless(t, in, got, pending)
				checkSame(t, fmt.Sprintf("split at %d", k), want, wantPending, got, pending)
			}
			got, pending, err := parseChunks(0, bytewise(in)...)
			if err != nil {
				t.Fatal(err)
			}
			checkLossless(t, in, got, pending)
			checkSame(t, "1-byte feeds", want, wantPending, got, pending)
		})
	}
}

func TestSSEReaderMatchesParser(t *testing.T) {
	readers := map[string]func(io.Reader) io.Reader{
		"whole":    func(r io.Reader) io.Reader { return r },
		"one byte": iotest.OneByteReader,
		"half":     iotest.HalfReader,
		"data+EOF": iotest.DataErrReader,
	}
	for name, in := range realisticStreams() {
		want, wantPending, _ := parseChunks(0, in)
		for rname, wrap := range readers {
			t.Run(name+"/"+rname, func(t *testing.T) {
				got, pending, err := readAll(wrap(bytes.NewReader(in)), 0)
				wantErr := io.EOF
				if strings.TrimRight(wantPending, "\r\n") != "" {
					wantErr = io.ErrUnexpectedEOF
				}
				if err != wantErr {
					t.Fatalf("final error %v, want %v", err, wantErr)
				}
				checkLossless(t, in, got, pending)
				checkSame(t, rname, want, wantPending, got, pending)
			})
		}
	}
}

func TestSSEReaderEnd(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		events  int
		wantErr error
	}{
		{"clean", "data: a\n\ndata: [DONE]\n\n", 2, io.EOF},
		{"empty", "", 0, io.EOF},
		{"trailing blank lines", "data: a\n\n\n\r\n", 1, io.EOF},
		{"trailing spaces", "data: a\n\n  \t", 1, io.EOF},
		{"ends inside an event", "data: a\n\ndata: b\n", 1, io.ErrUnexpectedEOF},
		{"ends inside a line", "data: a\n\ndata: [DO", 1, io.ErrUnexpectedEOF},
		{"ends after a field line", "data: a\n\nid: 1\n", 1, io.ErrUnexpectedEOF},
		{"ends after a block without data", "id: 1\n\n", 0, io.EOF},
		{"ends inside a BOM", "\xef\xbb", 0, io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewSSEReader(strings.NewReader(tt.in), 0)
			n := 0
			var err error
			for {
				if _, err = r.Next(); err != nil {
					break
				}
				n++
			}
			if n != tt.events || err != tt.wantErr {
				t.Fatalf("%d events, error %v; want %d, %v", n, err, tt.events, tt.wantErr)
			}
			if _, again := r.Next(); again != err {
				t.Errorf("Next after %v returned %v", err, again)
			}
		})
	}
}

func TestSSEReaderPassesReadErrors(t *testing.T) {
	boom := errors.New("connection reset")
	r := NewSSEReader(io.MultiReader(strings.NewReader("data: a\n\ndata: b"), iotest.ErrReader(boom)), 0)
	if e, err := r.Next(); err != nil || string(e.Data) != "a" {
		t.Fatalf("Next = %q, %v", e.Data, err)
	}
	if _, err := r.Next(); err != boom {
		t.Fatalf("Next error = %v, want %v", err, boom)
	}
	if got := string(r.Pending()); got != "data: b" {
		t.Errorf("Pending = %q", got)
	}
}

type emptyReader struct{}

func (emptyReader) Read([]byte) (int, error) { return 0, nil }

func TestSSEReaderNoProgress(t *testing.T) {
	if _, err := NewSSEReader(emptyReader{}, 0).Next(); err != io.ErrNoProgress {
		t.Fatalf("Next error = %v, want io.ErrNoProgress", err)
	}
}

func TestSSEEventTooLarge(t *testing.T) {
	const max = 64
	big := "data: " + strings.Repeat("x", 100) + "\n\n"
	tests := []struct {
		name   string
		chunks []string
		events int
	}{
		{"one feed", []string{"data: ok\n\n" + big}, 1},
		{"incomplete line over many feeds", []string{"data: ok\n\ndata: ", strings.Repeat("x", 40), strings.Repeat("x", 40)}, 1},
		{"blank lines only", []string{strings.Repeat("\n", 70)}, 0},
		{"comment lines inside an event", []string{"data: a\n" + strings.Repeat(": c\n", 20)}, 14},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var chunks [][]byte
			var input []byte
			for _, c := range tt.chunks {
				chunks = append(chunks, []byte(c))
				input = append(input, c...)
			}
			events, pending, err := parseChunks(max, chunks...)
			if !errors.Is(err, ErrEventTooLarge) {
				t.Fatalf("error = %v, want ErrEventTooLarge", err)
			}
			if len(events) != tt.events {
				t.Errorf("%d events before the error, want %d", len(events), tt.events)
			}
			checkLossless(t, input, events, pending)
		})
	}
	t.Run("sticky", func(t *testing.T) {
		p := NewSSEParser(max)
		emit := func(Event) error { return nil }
		if err := p.Feed([]byte(big), emit); !errors.Is(err, ErrEventTooLarge) {
			t.Fatal(err)
		}
		if err := p.Feed([]byte("data: x\n\n"), emit); !errors.Is(err, ErrEventTooLarge) {
			t.Fatalf("second Feed error = %v", err)
		}
	})
	t.Run("exactly at the limit", func(t *testing.T) {
		in := "data: " + strings.Repeat("x", max-8) + "\n\n"
		if events, _, err := parseChunks(max, []byte(in)); err != nil || len(events) != 1 {
			t.Fatalf("%d events, %v", len(events), err)
		}
	})
	t.Run("many small events in one feed", func(t *testing.T) {
		in := strings.Repeat("data: 0123456789\n\n", 100)
		if events, _, err := parseChunks(max, []byte(in)); err != nil || len(events) != 100 {
			t.Fatalf("%d events, %v", len(events), err)
		}
	})
	t.Run("reader", func(t *testing.T) {
		r := NewSSEReader(strings.NewReader("data: ok\n\n"+big), max)
		if _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Next(); !errors.Is(err, ErrEventTooLarge) {
			t.Fatalf("error = %v", err)
		}
	})
}

func TestSSEFeedEmitError(t *testing.T) {
	stop := errors.New("stop")
	p := NewSSEParser(0)
	var got []string
	emit := func(e Event) error {
		got = append(got, string(e.Data))
		if len(got) == 1 {
			return stop
		}
		return nil
	}
	if err := p.Feed([]byte("data: a\n\ndata: b\n\ndata: c"), emit); err != stop {
		t.Fatalf("Feed error = %v, want %v", err, stop)
	}
	if string(p.Pending()) != "data: b\n\ndata: c" {
		t.Fatalf("Pending = %q", p.Pending())
	}
	if err := p.Feed([]byte("\n\n"), emit); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"a", "b", "c"}) || len(p.Pending()) != 0 {
		t.Errorf("events %q, pending %q", got, p.Pending())
	}
}

func TestSSEParserZeroValue(t *testing.T) {
	var p SSEParser
	n := 0
	if err := p.Feed([]byte("data: x\n\n"), func(Event) error { n++; return nil }); err != nil || n != 1 {
		t.Fatalf("%d events, %v", n, err)
	}
}

// vllmEvent is one typical chat stream event.
var vllmEvent = []byte(`data: {"id":"chatcmpl-9f1c2d","object":"chat.completion.chunk","created":1735689600,` +
	`"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"delta":{"content":" token"},` +
	`"logprobs":null,"finish_reason":null}]}` + "\n\n")

func TestSSEParserSteadyStateAllocations(t *testing.T) {
	p := NewSSEParser(0)
	emit := func(Event) error { return nil }
	others := []byte(": ping\n\nevent: e\nid: 1\ndata: x\n\n")
	half := len(vllmEvent) / 2
	feed := func() {
		_ = p.Feed(vllmEvent, emit)
		_ = p.Feed(vllmEvent[:half], emit) // held back
		_ = p.Feed(vllmEvent[half:], emit)
		_ = p.Feed(others, emit)
	}
	feed()
	if allocs := testing.AllocsPerRun(100, feed); allocs != 0 {
		t.Errorf("steady-state Feed made %.1f allocations per run, want 0", allocs)
	}
}

// loopReader returns the same stream forever, in reads of step bytes.
type loopReader struct {
	stream []byte
	off    int
	step   int
}

func (r *loopReader) Read(b []byte) (int, error) {
	n := copy(b[:min(len(b), r.step)], r.stream[r.off:])
	r.off = (r.off + n) % len(r.stream)
	return n, nil
}

func TestSSEReaderSteadyStateAllocations(t *testing.T) {
	r := NewSSEReader(&loopReader{stream: vllmEvent, step: 100}, 0)
	next := func() {
		if _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
	}
	for range 10 {
		next()
	}
	if allocs := testing.AllocsPerRun(1000, next); allocs != 0 {
		t.Errorf("steady-state Next made %.1f allocations per event, want 0", allocs)
	}
}

func benchStream() []byte {
	return bytes.Repeat(vllmEvent, 1000)
}

func BenchmarkSSEParser(b *testing.B) {
	for _, size := range []int{len(vllmEvent), 4096} {
		b.Run(fmt.Sprintf("read=%d", size), func(b *testing.B) {
			stream := benchStream()
			p := NewSSEParser(0)
			events := 0
			emit := func(Event) error { events++; return nil }
			b.SetBytes(int64(len(stream)))
			b.ReportAllocs()
			for b.Loop() {
				for off := 0; off < len(stream); off += size {
					_ = p.Feed(stream[off:min(off+size, len(stream))], emit)
				}
			}
			b.ReportMetric(float64(events)/float64(b.N), "events/op")
		})
	}
}

func BenchmarkSSEReader(b *testing.B) {
	stream := benchStream()
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		r := NewSSEReader(bytes.NewReader(stream), 0)
		for {
			if _, err := r.Next(); err != nil {
				break
			}
		}
	}
}

func FuzzSSE(f *testing.F) {
	for _, s := range realisticStreams() {
		f.Add(s, uint16(len(s)/2))
	}
	f.Add([]byte("data: a\r"), uint16(8))
	f.Add([]byte("data: a\r\r\n: c\r\n"), uint16(9))
	f.Add([]byte("\xef\xbb\xbf:x\n\n"), uint16(1))
	f.Fuzz(func(t *testing.T, in []byte, split uint16) {
		want, wantPending, err := parseChunks(0, in)
		if err != nil {
			t.Skip("event over the default limit")
		}
		checkLossless(t, in, want, wantPending)
		k := int(split) % (len(in) + 1)
		got, pending, err := parseChunks(0, in[:k], in[k:])
		if err != nil {
			t.Fatal(err)
		}
		checkLossless(t, in, got, pending)
		checkSame(t, fmt.Sprintf("split at %d", k), want, wantPending, got, pending)
		got, pending, err = parseChunks(0, bytewise(in)...)
		if err != nil {
			t.Fatal(err)
		}
		checkSame(t, "1-byte feeds", want, wantPending, got, pending)
		got, pending, err = readAll(iotest.HalfReader(bytes.NewReader(in)), 0)
		if err != io.EOF && err != io.ErrUnexpectedEOF {
			t.Fatalf("reader error %v", err)
		}
		checkLossless(t, in, got, pending)
		checkSame(t, "reader", want, wantPending, got, pending)
	})
}

// TestSSEParserReset: after Reset, a parser that was left in the middle of a stream (an
// event pending, an event ID set, the BOM checked, a line ending split) parses a new
// stream exactly as a new parser does, and a parser that grew past the kept size still
// works.
func TestSSEParserReset(t *testing.T) {
	leftovers := []string{
		"id: 7\nevent: x\ndata: {\"half\":",
		"\ufeffdata: a\r",
		"data: " + strings.Repeat("z", 100<<10),
	}
	next := "\ufeffdata: first\n\nevent: e\ndata: second\r\n\r\n: note\ndata: [DONE]\n\n"
	parse := func(p *SSEParser) []Event {
		var got []Event
		if err := p.Feed([]byte(next), func(ev Event) error {
			ev.Data, ev.Raw = bytes.Clone(ev.Data), bytes.Clone(ev.Raw)
			got = append(got, ev)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	want := parse(NewSSEParser(0))
	for _, left := range leftovers {
		p := NewSSEParser(0)
		if err := p.Feed([]byte(left), func(Event) error { return nil }); err != nil {
			t.Fatal(err)
		}
		p.Reset()
		if len(p.Pending()) != 0 {
			t.Errorf("after Reset, %d bytes pending", len(p.Pending()))
		}
		if got := parse(p); !reflect.DeepEqual(got, want) {
			t.Errorf("after %.20q and Reset: events\n%+v\nwant\n%+v", left, got, want)
		}
	}
}
