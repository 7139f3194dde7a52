package engine

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: a Scraper.Run loop,
// a simulator, an HTTP server or a client connection.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var nan = math.NaN()

// hangLimit turns a hang into a failure. It bounds waits that end as soon as the code
// does what it should; nothing is asserted about time.
const hangLimit = 30 * time.Second

// floatEq reports whether got and want are the same measurement: both unknown, or equal
// up to float rounding.
func floatEq(got, want float64) bool {
	if math.IsNaN(got) || math.IsNaN(want) {
		return math.IsNaN(got) && math.IsNaN(want)
	}
	return math.Abs(got-want) <= 1e-12*math.Max(1, math.Abs(want))
}

// measurementDiff lists the measurement fields of got that differ from want (Kind and
// the floats; not Up, At, Err or Models, which the callers check as they need).
func measurementDiff(got, want Snapshot) []string {
	var out []string
	if got.Kind != want.Kind {
		out = append(out, fmt.Sprintf("Kind = %v, want %v", got.Kind, want.Kind))
	}
	if got.Sleeping != want.Sleeping {
		out = append(out, fmt.Sprintf("Sleeping = %v, want %v", got.Sleeping, want.Sleeping))
	}
	for _, f := range []struct {
		name      string
		got, want float64
	}{
		{"Waiting", got.Waiting, want.Waiting},
		{"Running", got.Running, want.Running},
		{"KVUsage", got.KVUsage, want.KVUsage},
		{"KVCapacityTokens", got.KVCapacityTokens, want.KVCapacityTokens},
		{"PrefixHitRatio", got.PrefixHitRatio, want.PrefixHitRatio},
		{"Preemptions", got.Preemptions, want.Preemptions},
		{"SpecAcceptRate", got.SpecAcceptRate, want.SpecAcceptRate},
		{"WaitingCapacity", got.WaitingCapacity, want.WaitingCapacity},
		{"KVUsedTokens", got.KVUsedTokens, want.KVUsedTokens},
		{"KVAvailableTokens", got.KVAvailableTokens, want.KVAvailableTokens},
		{"SpecAcceptLength", got.SpecAcceptLength, want.SpecAcceptLength},
		{"QueueTimeMean", got.QueueTimeMean, want.QueueTimeMean},
		{"LoRARunning", got.LoRARunning, want.LoRARunning},
		{"LoRAWaiting", got.LoRAWaiting, want.LoRAWaiting},
		{"LoRAMax", got.LoRAMax, want.LoRAMax},
	} {
		if !floatEq(f.got, f.want) {
			out = append(out, fmt.Sprintf("%s = %v, want %v", f.name, f.got, f.want))
		}
	}
	return out
}

// fields returns the float fields of s by name, for checks over all of them.
func fields(s Snapshot) map[string]float64 {
	return map[string]float64{
		"Waiting": s.Waiting, "Running": s.Running, "KVUsage": s.KVUsage,
		"KVCapacityTokens": s.KVCapacityTokens, "PrefixHitRatio": s.PrefixHitRatio,
		"Preemptions": s.Preemptions, "SpecAcceptRate": s.SpecAcceptRate,
		"WaitingCapacity": s.WaitingCapacity, "KVUsedTokens": s.KVUsedTokens,
		"KVAvailableTokens": s.KVAvailableTokens, "SpecAcceptLength": s.SpecAcceptLength,
		"QueueTimeMean": s.QueueTimeMean, "LoRARunning": s.LoRARunning,
		"LoRAWaiting": s.LoRAWaiting, "LoRAMax": s.LoRAMax,
	}
}

// fixture returns the contents of testdata/name.
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fixtureNames lists the exposition fixtures, sorted.
func fixtureNames(t testing.TB) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join("testdata", "*.prom"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for i, n := range names {
		names[i] = filepath.Base(n)
	}
	slices.Sort(names)
	return names
}
