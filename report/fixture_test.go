package report

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slogate/slogate/synth"
)

// Hand-written reports for the report tests, with figures in the range of the published benchmarks.

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// golden compares got with testdata/name, or rewrites the file with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if bytes.Equal(got, want) {
		return
	}
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := range max(len(g), len(w)) {
		gl, wl := "<end>", "<end>"
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			t.Fatalf("%s differs at line %d (run with -update if the change is intended)\n got: %s\nwant: %s", path, i+1, gl, wl)
		}
	}
}

var fixtureStart = time.Date(2026, 5, 4, 9, 0, 0, 0, time.UTC)

func passedGate() []synth.Check {
	return []synth.Check{
		{Name: "model_id", Verdict: synth.Pass}, {Name: "arithmetic", Verdict: synth.Pass}, {Name: "memory", Verdict: synth.Pass},
		{Name: "streaming", Verdict: synth.Pass}, {Name: "tool_call", Verdict: synth.Skip, Reason: "the engine does not offer tools (400)"},
	}
}

// validCell makes a valid closed-loop cell from its throughput and TTFT p50, with
// rounds whose throughput spreads by spread around the median.
func validCell(row string, input, output, conc int, tput, ttftMS float64, rounds int, spread, agreement float64) synth.Cell {
	perReq := tput / float64(conc) * 0.97
	c := synth.Cell{
		Row: row, Input: input, Output: output, Concurrency: conc, State: synth.Valid,
		Throughput: tput, PerRequestTPS: perReq, TTFTp50: ttftMS / 1000, TTFTp95: ttftMS * 1.6 / 1000,
		TPOTp95: 1.1 / perReq, ITLp50: 1 / perReq, E2Ep50: ttftMS/1000 + float64(output)/perReq,
		ActiveAvg: float64(conc) * 0.96, SuccessRate: 1, Spread: spread, Agreed: spread <= agreement,
	}
	for i := range rounds {
		done := max(1, int(tput*30/float64(output)))
		f := 1 + spread*(float64(i)/float64(max(rounds-1, 1))-0.5)
		c.Rounds = append(c.Rounds, synth.Round{Sent: done + conc, Succeeded: done, Cut: conc, Seconds: 30, OutputToks: done * output,
			Throughput: tput * f, Completed: done})
		c.Completed += done
		c.OutputToks += done * output
	}
	return c
}

func overCapacity(row string, input, output, conc, kv int) synth.Cell {
	return synth.Cell{Row: row, Input: input, Output: output, Concurrency: conc, State: synth.OverCapacity,
		Detail: fmt.Sprintf("%d x %d tokens > KV capacity %d", conc, input+output, kv)}
}

func skipped(row string, input, output, conc int) synth.Cell {
	return synth.Cell{Row: row, Input: input, Output: output, Concurrency: conc, State: synth.Skipped, Detail: "a smaller cell of this row failed"}
}

// matrixReport is a context matrix with every state, and one cell the run never reached.
func matrixReport() synth.Report {
	const out, kv = 4096, 1069056
	w := synth.Presets["context-matrix"]
	w.Contexts = []int{8192, 32768, 131072, 257024}
	w.Concurrency = []int{1, 4, 16, 64}
	w.Rounds = 2
	r := synth.Report{
		Schema: synth.SchemaVersion, Workload: w, Target: "http://127.0.0.1:8000", Model: "mimo-v2.6-distill-qwen-9b",
		Engine: "sglang", KVCapacity: kv, Started: fixtureStart, Finished: fixtureStart.Add(72*time.Minute + 14*time.Second),
		Gate: passedGate(),
		Prefill: []synth.Prefill{
			{Context: 8192, TTFT: 0.524, TokPerS: 15600},
			{Context: 32768, TTFT: 1.565, TokPerS: 20600},
			{Context: 131072, TTFT: 5.741, TokPerS: 22400},
			{Context: 257024, Failure: "transport"},
		},
	}
	in := func(ctx int) int { return ctx - out }
	r.Cells = []synth.Cell{
		validCell("8K", in(8192), out, 1, 62.3, 540, 2, 0.012, 0.06),
		validCell("8K", in(8192), out, 4, 231.4, 610, 2, 0.031, 0.06),
		validCell("8K", in(8192), out, 16, 804.9, 1130, 2, 0.092, 0.06),
		validCell("8K", in(8192), out, 64, 2410, 4260, 2, 0.044, 0.06),
		validCell("32K", in(32768), out, 1, 58.1, 1590, 2, 0.008, 0.06),
		{Row: "32K", Input: in(32768), Output: out, Concurrency: 4, State: synth.LoopedState, Detail: "3 of 4 outputs repeated themselves",
			Rounds: []synth.Round{{Sent: 4, Succeeded: 4, Looped: 3, Seconds: 30, OutputToks: 16384, Completed: 4}}, Completed: 4, OutputToks: 16384, SuccessRate: 1},
		{Row: "32K", Input: in(32768), Output: out, Concurrency: 16, State: synth.Rejected, Detail: "16 http_status",
			Rounds: []synth.Round{{Sent: 16, Failures: map[string]int{"http_status": 16}, Seconds: 30}}},
		overCapacity("32K", in(32768), out, 64, kv),
		validCell("128K", in(131072), out, 1, 41.7, 5810, 2, 0.015, 0.06),
		{Row: "128K", Input: in(131072), Output: out, Concurrency: 4, State: synth.Failed, Detail: "4 transport", SuccessRate: 1.0 / 3,
			Rounds: []synth.Round{{Sent: 6, Succeeded: 2, Failures: map[string]int{"transport": 4}, Seconds: 30, OutputToks: 8192, Completed: 2}}, Completed: 2, OutputToks: 8192},
		skipped("128K", in(131072), out, 16),
		overCapacity("128K", in(131072), out, 64, kv),
		{Row: "251K", Input: in(257024), Output: out, Concurrency: 1, State: synth.NotCompleted,
			Rounds: []synth.Round{{Sent: 1, Cut: 1, Seconds: 30}}},
		skipped("251K", in(257024), out, 4),
		overCapacity("251K", in(257024), out, 16, kv),
		// 251K × 64 is missing: the run ended before it.
	}
	return r
}

// shapesReport is three of the published H200 workload shapes at 1, 16 and 64 streams.
func shapesReport() synth.Report {
	w := synth.Presets["shapes"]
	w.Shapes = []synth.Shape{{Name: "API-S", Input: 2048, Output: 256}, {Name: "CHAT-S", Input: 2048, Output: 512}, {Name: "DOC-L", Input: 131072, Output: 2048}}
	r := synth.Report{
		Schema: synth.SchemaVersion, Workload: w, Target: "http://10.0.0.7:8000", Model: "mimo-v2.6-flash-rl",
		Engine: "vllm", KVCapacity: 4718592, Started: fixtureStart, Finished: fixtureStart.Add(19*time.Minute + 41*time.Second),
		Gate: passedGate(),
	}
	r.Cells = []synth.Cell{
		validCell("API-S", 2048, 256, 1, 198.2, 61, 2, 0.004, 0.06),
		validCell("API-S", 2048, 256, 16, 1019.6, 148, 2, 0.021, 0.06),
		validCell("API-S", 2048, 256, 64, 2075, 412, 2, 0.037, 0.06),
		validCell("CHAT-S", 2048, 512, 1, 201.4, 60, 2, 0.006, 0.06),
		validCell("CHAT-S", 2048, 512, 16, 1420.3, 151, 2, 0.018, 0.06),
		validCell("CHAT-S", 2048, 512, 64, 2838, 430, 2, 0.058, 0.06),
		validCell("DOC-L", 131072, 2048, 1, 95.1, 6120, 2, 0.011, 0.06),
		validCell("DOC-L", 131072, 2048, 16, 180.4, 38900, 2, 0.071, 0.06),
		{Row: "DOC-L", Input: 131072, Output: 2048, Concurrency: 64, State: synth.Rejected, Detail: "128 http_status",
			Rounds: []synth.Round{{Sent: 64, Failures: map[string]int{"http_status": 64}, Seconds: 60}, {Sent: 64, Failures: map[string]int{"http_status": 64}, Seconds: 60}}},
	}
	return r
}

// scanReport is the published H20-3e scan: 8K in / 128 out at 0.5×, 0.8× and 1.1× of 1.7499 req/s.
func scanReport() synth.Report {
	w := synth.Presets["rate-scan"]
	const ref = 1.7499
	r := synth.Report{
		Schema: synth.SchemaVersion, Workload: w, Target: "http://127.0.0.1:30000", Model: "mimo-v2.6-flash-rl",
		Engine: "sglang", Reference: ref, Started: fixtureStart, Finished: fixtureStart.Add(31*time.Minute + 2*time.Second),
		Gate: passedGate(),
	}
	scan := func(m, done, p50, p95, tpot float64, completed int, spread float64) synth.Cell {
		c := synth.Cell{Row: "8K/128", Input: 8192, Output: 128, Multiple: m, Rate: m * ref, State: synth.Valid,
			Throughput: done * 128, PerRequestTPS: 0.92 / tpot, TTFTp50: p50, TTFTp95: p95, TPOTp95: tpot, ITLp50: tpot * 0.85,
			E2Ep50: p50 + 127*tpot*0.9, ActiveAvg: done * (p50 + 127*tpot), CompletionRate: done,
			Completed: completed, OutputToks: completed * 128, SuccessRate: 1, Spread: spread, Agreed: spread <= 0.06}
		for range 3 {
			c.Rounds = append(c.Rounds, synth.Round{Sent: completed / 3, Succeeded: completed / 3, Seconds: 180, OutputToks: completed / 3 * 128,
				Throughput: done * 128, Completed: completed / 3})
		}
		return c
	}
	r.Cells = []synth.Cell{
		scan(0.5, 0.8741, 0.71, 1.12, 0.0212, 600, 0.012),
		scan(0.8, 1.3968, 1.9, 3.55, 0.0265, 756, 0.021),
		scan(1.1, 1.6622, 14.2, 26.85, 0.0391, 1041, 0.043),
	}
	return r
}
