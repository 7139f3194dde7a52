package engine

import (
	"bytes"
	"errors"
	"math"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// FuzzRead feeds arbitrary bytes to the exposition parser and the mapping onto a
// Snapshot: neither may panic; a parse fails only with ErrMalformed and a read only with
// ErrUnrecognised; every field of a snapshot read is finite or unknown; and KVUsage is
// the exposition's own value (the largest finite sample of the first usage metric
// present), neither clamped nor invented.
func FuzzRead(f *testing.F) {
	// The fixtures seed the corpus in pieces of whole lines. Whole, they would stall a
	// short run: the fuzzer minimises each new input it finds by trying to remove every
	// range of its bytes, quadratic in its length. TestReadInvariants checks the same
	// properties on the whole fixtures.
	for _, name := range fixtureNames(f) {
		for _, piece := range pieces(fixture(f, name), 256) {
			f.Add(piece)
		}
	}
	for _, s := range []string{
		"",
		"vllm:kv_cache_usage_perc 1e308\nvllm:kv_cache_usage_perc{engine=\"1\"} -1e308\n",
		"vllm:num_requests_waiting{engine=\"0\"} 1.7e308\nvllm:num_requests_waiting{engine=\"1\"} 1.7e308\n",
		"vllm:prefix_cache_hits_total 1e-320\nvllm:prefix_cache_queries_total 5e-324\n",
		"sglang:token_usage{tp_rank=\"0\"} +Inf\nsglang:token_usage{tp_rank=\"1\"} 0.5\n",
		"vllm:cache_config_info{block_size=\"1e300\",num_gpu_blocks=\"1e300\"} 1\nvllm:num_requests_running 1\n",
		"# TYPE vllm:kv_cache_usage_perc histogram\nvllm:kv_cache_usage_perc_bucket{le=\"+Inf\"} 1\nvllm:num_requests_running 0\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(checkRead)
}

// TestReadInvariants checks the properties FuzzRead checks on the whole fixtures.
func TestReadInvariants(t *testing.T) {
	for _, name := range fixtureNames(t) {
		t.Run(name, func(t *testing.T) { checkRead(t, fixture(t, name)) })
	}
}

// checkRead parses data as an exposition and reads it as every engine, checking the
// properties FuzzRead documents.
func checkRead(t *testing.T, data []byte) {
	fams, err := parseExposition(bytes.NewReader(data))
	if err != nil {
		if !errors.Is(err, ErrMalformed) {
			t.Fatalf("parse error %v is not ErrMalformed", err)
		}
		return
	}
	for _, k := range []Kind{KindAuto, KindVLLM, KindSGLang} {
		rd, err := read(fams, k)
		if err != nil {
			if !errors.Is(err, ErrUnrecognised) {
				t.Fatalf("read(%v): %v is not ErrUnrecognised", k, err)
			}
			continue
		}
		if k != KindAuto && rd.kind != k {
			t.Fatalf("read(%v) gave %v", k, rd.kind)
		}
		for _, prev := range []*reading{nil, &rd} {
			s := rd.snapshot(prev)
			for name, v := range fields(s) {
				if math.IsInf(v, 0) {
					t.Fatalf("%s = %v, want finite or NaN", name, v)
				}
			}
			if want := kvUsageOracle(fams, rd.kind); !floatEq(s.KVUsage, want) {
				t.Fatalf("KVUsage = %v, want %v", s.KVUsage, want)
			}
		}
	}
}

// pieces splits an exposition at line boundaries into pieces of at most max bytes (or
// one line, if longer).
func pieces(text []byte, max int) [][]byte {
	var out [][]byte
	for len(text) > 0 {
		end := bytes.IndexByte(text, '\n') + 1
		if end == 0 {
			end = len(text)
		}
		for end < len(text) {
			next := bytes.IndexByte(text[end:], '\n') + 1
			if next == 0 || end+next > max {
				break
			}
			end += next
		}
		out = append(out, text[:end])
		text = text[end:]
	}
	return out
}

// kvUsageOracle computes the KV usage an exposition gives, independently of read: the
// largest finite gauge, counter or untyped sample of the first usage metric present.
func kvUsageOracle(fams map[string]*dto.MetricFamily, k Kind) float64 {
	names := map[Kind][]string{
		KindVLLM:   {"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"},
		KindSGLang: {"sglang:token_usage"},
	}[k]
	for _, n := range names {
		f, ok := fams[n]
		if !ok {
			continue
		}
		out := math.NaN()
		for _, m := range f.GetMetric() {
			var v float64
			switch {
			case m.GetGauge() != nil:
				v = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				v = m.GetCounter().GetValue()
			case m.GetUntyped() != nil:
				v = m.GetUntyped().GetValue()
			default:
				continue
			}
			if !math.IsNaN(v) && !math.IsInf(v, 0) && (math.IsNaN(out) || v > out) {
				out = v
			}
		}
		return out
	}
	return math.NaN()
}
