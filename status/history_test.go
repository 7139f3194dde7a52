package status

import (
	"fmt"
	"math"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/slogate/slogate/clock"
	"github.com/slogate/slogate/history"
	"github.com/slogate/slogate/synth"
)

// storedRuns returns a probe history of three runs of workload name, the last with the
// TTFT of cell chat × 1 doubled, compared by the history's own rule.
func storedRuns(t *testing.T, name string) *history.Store {
	t.Helper()
	s, err := history.Open(history.Config{Dir: t.TempDir(), Runs: 10, Bytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	for i, ttft := range []float64{0.02, 0.0202, 0.04} {
		rep := *shapesReport("tiny-model")
		rep.Workload.Name, rep.Workload.Agreement = name, 0.06
		rep.Label, rep.Finished = []string{"before", "", "after"}[i], epoch.Add(time.Duration(i-3)*time.Hour)
		rep.Cells = append([]synth.Cell(nil), rep.Cells...)
		rep.Cells[0].TTFTp95 = ttft
		if _, err := s.Append(rep); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// TestPageHistory renders the probe history section: its runs newest first, the trend
// of every figure of every cell, and the regression of the newest run marked.
func TestPageHistory(t *testing.T) {
	page := func(t *testing.T, src HistorySource) *html.Node {
		cfg := Config{Admission: stats(), Engine: snapshot(), Clock: clock.NewFake(epoch)}
		if src != nil {
			cfg.History = src
		}
		srv := httptest.NewServer(New(cfg))
		defer srv.Close()
		return fetch(t, srv.URL+"/")
	}
	section := func(t *testing.T, doc *html.Node) *html.Node {
		t.Helper()
		s := byID(doc, "probe-history")
		if s == nil {
			t.Fatal("no section#probe-history")
		}
		return s
	}

	t.Run("off", func(t *testing.T) {
		if got := text(section(t, page(t, nil))); !strings.Contains(got, "keeps no probe history") {
			t.Errorf("section says %q", got)
		}
	})
	t.Run("empty", func(t *testing.T) {
		s, err := history.Open(history.Config{Dir: t.TempDir(), Runs: 10, Bytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		if byID(page(t, s), "history-none") == nil {
			t.Error("an empty history does not say so")
		}
	})
	t.Run("three runs", func(t *testing.T) {
		sec := section(t, page(t, storedRuns(t, "demo")))
		w := find(sec, hasAttr("data-workload", "demo"))
		if len(w) != 1 {
			t.Fatalf("%d blocks of workload demo", len(w))
		}
		var runs []string
		for _, r := range find(w[0], func(n *html.Node) bool { _, ok := attr(n, "data-run"); return ok }) {
			id, _ := attr(r, "data-run")
			runs = append(runs, id)
		}
		if strings.Join(runs, " ") != "000003-demo 000002-demo 000001-demo" {
			t.Errorf("runs %v, want newest first", runs)
		}
		if f := find(w[0], hasAttr("data-field", "regressions")); len(f) == 0 || text(f[0]) != "1 regressed" {
			t.Errorf("the workload's heading does not say 1 regressed")
		}
		if links := find(w[0], hasAttr("href", "probe/history/000001-demo/report.html")); len(links) != 1 {
			t.Errorf("the oldest run links to its report %d times, want once", len(links))
		}

		rows := find(w[0], func(n *html.Node) bool { _, ok := attr(n, "data-cell"); return ok })
		if len(rows) != 3 {
			t.Fatalf("%d trend rows, want the newest run's 3 cells", len(rows))
		}
		for _, r := range rows {
			id, _ := attr(r, "data-cell")
			class, _ := attr(r, "class")
			if (class == "regressed") != (id == "chat-1") {
				t.Errorf("cell %s has class %q; only chat-1 regressed", id, class)
			}
		}
		moves := elements(rows[0], "td", "move bad")
		if len(moves) != 1 || text(moves[0]) != "↑" {
			t.Fatalf("cell chat-1 marks %d figures as regressed, want its TTFT, up", len(moves))
		}
		if tip, _ := attr(moves[0], "title"); !strings.Contains(tip, "20 ms → 40 ms (+98.0%, noise band ±6.0%)") {
			t.Errorf("the regression's tooltip says %q", tip)
		}
		if got := text(rows[1]); strings.Count(got, "≈") != 3 {
			t.Errorf("cell chat-4 reads %q, want all three figures within noise", got)
		}
		// A trend per figure of the valid cells (three runs each); the failed cell has none
		// and says why.
		if n := len(elements(sec, "svg", "spark")); n != 6 {
			t.Errorf("%d sparklines, want 2 valid cells × 3 figures", n)
		}
		if got := text(rows[2]); !strings.Contains(got, "failed") {
			t.Errorf("the failed cell reads %q", got)
		}
	})
	t.Run("hostile names escaped", func(t *testing.T) {
		sec := section(t, page(t, storedRuns(t, `<script>alert("w")</script>`)))
		if len(elements(sec, "script", "")) > 0 || !strings.Contains(text(sec), `<script>alert("w")</script>`) {
			t.Error("a workload's name is not escaped")
		}
	})
}

func TestSparkline(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		name   string
		values []float64
		lines  int
		circle bool
	}{
		{"too few", []float64{1}, 0, false},
		{"one measured", []float64{nan, 3, nan}, 0, false},
		{"flat", []float64{2, 2, 2}, 1, true},
		{"gap", []float64{1, 2, nan, 3, 4}, 2, true},
		{"newest missing", []float64{1, 2, 3, nan}, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svg := string(sparkline(tc.values, "TTFT p95"))
			if got := strings.Count(svg, "<polyline"); got != tc.lines || strings.Contains(svg, "<circle") != tc.circle {
				t.Errorf("%s: %d lines (want %d), want a circle: %v", svg, got, tc.lines, tc.circle)
			}
			if svg != "" && !strings.Contains(svg, fmt.Sprintf("<title>TTFT p95 over %d runs</title>", len(tc.values))) {
				t.Errorf("%s lacks its title", svg)
			}
			if strings.Contains(svg, "NaN") {
				t.Errorf("%s draws NaN", svg)
			}
		})
	}
}
