package report

import (
	"strconv"
	"strings"
	"testing"
)

// FuzzFindRun reads --baseline against runs with arbitrary labels: FindRun either names
// a run the text is the name, the label or the position of, or fails listing the runs;
// and every run's name finds a run of that name.
func FuzzFindRun(f *testing.F) {
	for _, s := range [][3]string{{"tp1", "tp2", "2"}, {"2", "1", "1"}, {"", "", "vllm m 2026-05-04 09:00 (2)"}, {"a|b", " a ", "a"}, {"x", "x", "x (2)"}, {"3", "", "-1"}} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, a, b, s string) {
		c, err := NewComparison([]Run{run(a, 0.06, stateCell(1, "rej")), run(b, 0.06, stateCell(1, "rej")), run("", 0.06)})
		if err != nil {
			t.Fatal(err)
		}
		i, err := c.FindRun(s)
		if err != nil {
			if !strings.Contains(err.Error(), strconv.Quote(c.Runs[2].Name)) {
				t.Fatalf("FindRun(%q): error %q does not list the runs", s, err)
			}
		} else {
			q := strings.TrimSpace(s)
			r := c.Runs[i]
			if q != r.Name && q != strings.TrimSpace(r.Report.Label) && q != strconv.Itoa(i+1) {
				t.Fatalf("FindRun(%q) = %d, a run named %q, labelled %q", s, i, r.Name, r.Report.Label)
			}
		}
		for _, r := range c.Runs {
			j, err := c.FindRun(r.Name)
			if err != nil || strings.TrimSpace(c.Runs[j].Name) != strings.TrimSpace(r.Name) && strings.TrimSpace(c.Runs[j].Report.Label) != strings.TrimSpace(r.Name) {
				t.Fatalf("FindRun(%q) = %d, %v", r.Name, j, err)
			}
		}
	})
}
