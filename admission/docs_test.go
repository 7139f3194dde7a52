package admission

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestOperationsExamples: every YAML example of docs/operations.md with a tenants or
// tiers section is a valid tiers file (a tenants section shown alone gets one tier), so
// the examples users copy cannot go stale.
func TestOperationsExamples(t *testing.T) {
	doc, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	n := 0
	for _, b := range blocks {
		y := b[1]
		if !strings.Contains(y, "tenants:") && !strings.Contains(y, "tiers:") {
			continue
		}
		n++
		if !strings.Contains(y, "tiers:") {
			y = "tiers:\n  - {name: all, max_in_flight: 8, max_queue: 16}\n" + y
		}
		if _, err := ParseConfig([]byte(y)); err != nil {
			t.Errorf("example %d of docs/operations.md: %v\n%s", n, err, b[1])
		}
	}
	if n < 2 {
		t.Fatalf("found %d tiers or tenants examples in docs/operations.md, want at least the tenants section and the worked example", n)
	}
}
