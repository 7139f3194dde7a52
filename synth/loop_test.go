package synth

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slogate/slogate/enginesim"
)

// cyclingList is a numbered list whose items come round again, numbered on.
func cyclingList(items []string, n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "%d. %s\n", i+1, items[i%len(items)])
	}
	return b.String()
}

// driftingParagraphs cycles through sentences, breaking paragraphs after a number of
// sentences that does not divide the cycle and varying the space between sentences, so
// that no unit of bytes repeats back to back while the words do.
func driftingParagraphs(sentences []string, n int) string {
	var b strings.Builder
	seps := []string{" ", "  ", "\n", " "}
	for i := range n {
		b.WriteString(sentences[i%len(sentences)])
		switch {
		case i%4 == 3:
			b.WriteString("\n\n")
		default:
			b.WriteString(seps[i%len(seps)])
		}
	}
	return b.String()
}

// countTo writes the numbers 1 to n, ten to a line.
func countTo(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%d", i)
		if i%10 == 0 {
			b.WriteString("\n")
		} else {
			b.WriteString(" ")
		}
	}
	return b.String()
}

// numberTable writes a CSV table of n rows of measurements.
func numberTable(n int) string {
	var b strings.Builder
	b.WriteString("date,min,max,mean\n")
	for i := range n {
		fmt.Fprintf(&b, "2026-03-%02d,%.1f,%.1f,%.2f\n", i%28+1, 10+float64(i*7%13), 20+float64(i*5%11), 15+float64(i*3%17)/3)
	}
	return b.String()
}

func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "loop", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var (
	distinctSteps = []string{
		"Check that the engine answers on its health endpoint before sending any load.",
		"Read the KV cache capacity from the metrics so that oversized cells can be skipped.",
		"Run the functional gate: the model id, a sum, a code word and a streamed answer.",
		"Warm every cell up with one short request per stream before measuring it.",
		"Measure three rounds and keep the median of the rounds that had no failures.",
		"Discard any cell whose answers kept repeating the same text.",
		"Stop a row after a cell in which nothing finished inside the window.",
		"Publish the results as metrics, a JSON document, Markdown and HTML.",
		"Compare the rounds and mark the cell unstable when they disagree by more than six percent.",
		"Retry later when live traffic needs the engine more than the probe does.",
	}
	recipe = []string{
		"Preheat the oven to two hundred degrees and grease a deep baking tin.",
		"Rub the butter into the flour until the mixture looks like fine breadcrumbs.",
		"Bake for twenty minutes, turn the tin round, and bake for ten minutes more.",
	}
	advice = []string{
		"It is important to remember that every system has its limits.",
		"When the load grows beyond them, latency rises before throughput falls.",
		"Measuring both at once is the only way to see the knee clearly.",
		"That is why we should always look at the whole curve.",
		"In the end, the curve tells us where the limits are.",
	}
)

func TestLoopedDetectsRepetition(t *testing.T) {
	tests := []struct {
		name string
		text string
	}{
		{"phrase repeated verbatim (the simulator's loop fault)", strings.Repeat(" I say it once more.", 40)},
		{"phrase after a normal start", "The answer to your question depends on the engine." + strings.Repeat(" I say it once more.", 30)},
		{"single character run", strings.Repeat("!", 300)},
		{"single letter run after text", "Well, the result is " + strings.Repeat("a", 200)},
		{"newlines", "Done." + strings.Repeat("\n", 120)},
		{"two-character unit", strings.Repeat("ha", 100)},
		{"numbered list that restarts", strings.Repeat("1. Open the valve.\n2. Read the gauge.\n3. Close the valve.\n", 12)},
		{"numbered list that cycles, numbered on", cyclingList(recipe, 30)},
		{"paragraph cycling with drifting boundaries", driftingParagraphs(advice, 40)},
		{"long unit (200 bytes) repeated", strings.Repeat(recipe[0]+" "+recipe[1]+" "+recipe[2][:50]+"|", 6)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !Looped(tc.text) {
				t.Errorf("Looped = false, want true for %q", clip(tc.text))
			}
		})
	}
}

func TestLoopedPassesOrdinaryText(t *testing.T) {
	tests := map[string]string{
		"short answer":                     "42",
		"short sentence":                   "The capital of France is Paris.",
		"short repetition":                 strings.Repeat(" I say it once more.", 3), // 60 bytes, below loopMinText
		"short run":                        strings.Repeat("a", loopMinText-1),
		"three repeats of a unit":          strings.Repeat("0123456789abcdef0123456789", 3),
		"a few words said twice":           strings.Repeat("yes, that is right; ", 3),
		"Go code (generated, small)":       "func add(a, b int) int {\n\treturn a + b\n}\n\nfunc sub(a, b int) int {\n\treturn a - b\n}\n",
		"numbered list of different items": cyclingList(distinctSteps, len(distinctSteps)),
		"counting":                         countTo(300),
		"a ruler line at the end":          string(mustRead(t, "prose.txt")) + strings.Repeat("=", 90) + "\n",
		"a table of numbers":               numberTable(40),
	}
	for _, name := range []string{"prose.txt", "doc.json"} {
		tests["testdata/loop/"+name] = string(mustRead(t, name))
	}
	// Real Go code: this package's own sources.
	sources, err := filepath.Glob("*.go")
	if err != nil || len(sources) == 0 {
		t.Fatalf("no Go sources: %v", err)
	}
	for _, name := range sources {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		tests["Go source "+name] = string(b)
	}
	for name, text := range tests {
		t.Run(name, func(t *testing.T) {
			if Looped(text) {
				t.Errorf("Looped = true, want false (periodic tail %v, recycled %v)", periodicTail(text), recycled(text))
			}
		})
	}
}

// The simulator's answers: random words when healthy, one phrase over and over with the
// loop fault. Both are judged on what the prober really received.
func TestLoopedOnSimulatorOutput(t *testing.T) {
	tests := []struct {
		faults string
		looped bool
	}{
		{"", false},
		{"loop", true},
	}
	// Speed 100: 512 tokens take ~0.1 s instead of ~1 s; the text is the same.
	s := startSim(t, enginesim.Config{Speed: 100})
	for _, tc := range tests {
		t.Run("faults="+tc.faults, func(t *testing.T) {
			tg := s.target(t, "sim-tiny")
			if tc.faults != "" {
				tg = faulty(tg, tc.faults)
			}
			for seed := uint64(1); seed <= 5; seed++ {
				smp := tg.send(context.Background(), prompt{input: 64, output: 512, seed: seed}, farFuture)
				if !smp.Success() {
					t.Fatalf("request failed: %v", smp.Failure)
				}
				if len(strings.Fields(smp.Text)) < loopMinWords {
					t.Fatalf("answer of %d words is too short to be judged: %q", len(strings.Fields(smp.Text)), clip(smp.Text))
				}
				if smp.Looped != tc.looped || Looped(smp.Text) != tc.looped {
					t.Errorf("seed %d: Sample.Looped %v, Looped(text) %v, want %v for %q", seed, smp.Looped, Looped(smp.Text), tc.looped, clip(smp.Text))
				}
			}
		})
	}
}

func FuzzLooped(f *testing.F) {
	f.Add(strings.Repeat(" I say it once more.", 40))
	f.Add(strings.Repeat("!", 300))
	f.Add(cyclingList(recipe, 12))
	f.Add(driftingParagraphs(advice, 20))
	f.Add("")
	f.Add("42")
	f.Add(strings.Repeat("\xff\xfe", 100))
	f.Fuzz(func(t *testing.T, text string) {
		got := Looped(text)
		if got != Looped(text) {
			t.Fatal("Looped is not deterministic")
		}
		if len(text) < loopMinText && len(strings.Fields(text)) < loopMinWords && got {
			t.Fatalf("a short text (%d bytes) was judged looped", len(text))
		}
	})
}
