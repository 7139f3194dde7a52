package measure

import (
	"encoding/json"
	"flag"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// TestSLORule: which requests an SLO judges, by which TTFT, and where the bounds lie.
func TestSLORule(t *testing.T) {
	ms := time.Millisecond
	slo := NewSLO(100*ms, 10*ms)
	// stream is a judged request: a stream that ended ok with output.
	stream := func(queue, ttft, tpot time.Duration) Result {
		return Result{Stream: true, Outcome: OK, OutputChunks: 5, QueueWait: queue, TTFT: ttft, TPOT: tpot}
	}
	with := func(r Result, f func(*Result)) Result { f(&r); return r }
	for _, c := range []struct {
		name                 string
		slo                  SLO
		res                  Result
		byClient, byDispatch bool
	}{
		{"well within", slo, stream(0, 50*ms, 5*ms), true, true},
		{"TTFT exactly at the SLO", slo, stream(0, 100*ms, 5*ms), true, true},
		{"TTFT 1ns over", slo, stream(0, 100*ms+1, 5*ms), false, false},
		{"TPOT exactly at the SLO", slo, stream(0, 50*ms, 10*ms), true, true},
		{"TPOT 1ns over", slo, stream(0, 50*ms, 10*ms+1), false, false},
		{"queue wait pushes the client's TTFT over", slo, stream(60*ms, 50*ms, 5*ms), false, true},
		{"queue wait up to the SLO exactly", slo, stream(50*ms, 50*ms, 5*ms), true, true},
		{"one output token: no TPOT to judge", slo, stream(0, 50*ms, 0), true, true},
		{"no TTFT bound: any TTFT", NewSLO(0, 10*ms), stream(time.Hour, time.Hour, 5*ms), true, true},
		{"no TPOT bound: any TPOT", NewSLO(100*ms, 0), stream(0, 50*ms, time.Hour), true, true},
		{"no bounds at all", SLO{}, stream(time.Hour, time.Hour, time.Hour), true, true},
		{"non-streamed: not judged", slo, with(stream(0, 0, 0), func(r *Result) { r.Stream = false }), false, false},
		{"no output: not judged", slo, with(stream(0, 0, 0), func(r *Result) { r.OutputChunks = 0 }), false, false},
		{"no output, no bounds: still not judged", SLO{}, with(stream(0, 0, 0), func(r *Result) { r.OutputChunks = 0 }), false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.slo.MetByClient(c.res); got != c.byClient {
				t.Errorf("MetByClient = %v, want %v", got, c.byClient)
			}
			if got := c.slo.MetFromDispatch(c.res); got != c.byDispatch {
				t.Errorf("MetFromDispatch = %v, want %v", got, c.byDispatch)
			}
		})
	}
	// Every outcome but OK is not judged, however fast the request was.
	for _, o := range Outcomes() {
		r := with(stream(0, ms, ms), func(r *Result) { r.Outcome = o })
		if got := slo.MetByClient(r); got != (o == OK) {
			t.Errorf("%s: MetByClient = %v", o, got)
		}
		if got := slo.MetFromDispatch(r); got != (o == OK) {
			t.Errorf("%s: MetFromDispatch = %v", o, got)
		}
	}
}

func TestLatencies(t *testing.T) {
	r := Result{Stream: true, Outcome: OK, OutputChunks: 3, QueueWait: 30, TTFT: 100, TPOT: 7}
	if ttft, tpot, ok := ClientLatency(r); ttft != 130 || tpot != 7 || !ok {
		t.Errorf("ClientLatency = %v, %v, %v; want 130ns, 7ns, true", ttft, tpot, ok)
	}
	if ttft, tpot, ok := DispatchLatency(r); ttft != 100 || tpot != 7 || !ok {
		t.Errorf("DispatchLatency = %v, %v, %v; want 100ns, 7ns, true", ttft, tpot, ok)
	}
	r.Outcome = AbortedMidstream
	if ttft, tpot, ok := ClientLatency(r); ttft != 0 || tpot != 0 || ok {
		t.Errorf("ClientLatency of a broken stream = %v, %v, %v; want 0, 0, false", ttft, tpot, ok)
	}
	if ttft, tpot, ok := DispatchLatency(r); ttft != 0 || tpot != 0 || ok {
		t.Errorf("DispatchLatency of a broken stream = %v, %v, %v; want 0, 0, false", ttft, tpot, ok)
	}
}

func TestSLOOr(t *testing.T) {
	def := NewSLO(2*time.Second, 100*time.Millisecond)
	for _, c := range []struct{ in, want SLO }{
		{SLO{}, def},
		{NewSLO(time.Second, 0), NewSLO(time.Second, 100*time.Millisecond)},
		{NewSLO(0, time.Millisecond), NewSLO(2*time.Second, time.Millisecond)},
		{NewSLO(time.Second, time.Millisecond), NewSLO(time.Second, time.Millisecond)},
	} {
		if got := c.in.Or(def); got != c.want {
			t.Errorf("%+v.Or(%+v) = %+v, want %+v", c.in, def, got, c.want)
		}
	}
}

// TestDurationFormats: a Duration reads and writes "2s" in YAML, JSON and text, and an
// SLO's fields are ttft and tpot, left out when zero.
func TestDurationFormats(t *testing.T) {
	type doc struct {
		SLO  SLO      `yaml:"slo" json:"slo"`
		Wait Duration `yaml:"wait,omitempty" json:"wait,omitempty"`
	}
	in := doc{SLO: NewSLO(2*time.Second, 0), Wait: Duration(90 * time.Second)}

	y, err := yaml.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := "slo:\n    ttft: 2s\nwait: 1m30s\n"; string(y) != want {
		t.Errorf("YAML:\n%s\nwant:\n%s", y, want)
	}
	var back doc
	if err := yaml.Unmarshal([]byte("slo: {ttft: 2s, tpot: 100ms}\nwait: 1m30s\n"), &back); err != nil {
		t.Fatal(err)
	}
	if want := (doc{SLO: NewSLO(2*time.Second, 100*time.Millisecond), Wait: Duration(90 * time.Second)}); back != want {
		t.Errorf("from YAML: %+v, want %+v", back, want)
	}
	err = yaml.Unmarshal([]byte("slo:\n  ttft: 2s\n  tpot: fast\n"), &back)
	if want := `line 3: "fast" is not a duration such as 2s or 100ms`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("bad YAML duration: %v, want an error with %q", err, want)
	}

	j, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"slo":{"ttft":"2s"},"wait":"1m30s"}`; string(j) != want {
		t.Errorf("JSON %s, want %s", j, want)
	}
	back = doc{}
	if err := json.Unmarshal(j, &back); err != nil || back != in {
		t.Errorf("from JSON: %+v, %v; want %+v", back, err, in)
	}
	if err := json.Unmarshal([]byte(`{"wait":"soon"}`), &back); err == nil {
		t.Error("JSON duration \"soon\" parsed")
	}

	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	var d Duration
	fs.TextVar(&d, "d", Duration(5*time.Second), "a duration")
	if err := fs.Parse([]string{"-d", "250ms"}); err != nil || d != Duration(250*time.Millisecond) {
		t.Errorf("flag: %v, %v; want 250ms", d, err)
	}
	if got := fs.Lookup("d").DefValue; got != "5s" {
		t.Errorf("flag default written %q, want 5s", got)
	}
	if got := Duration(1500 * time.Millisecond).String(); got != "1.5s" {
		t.Errorf("String = %q, want 1.5s", got)
	}
}
