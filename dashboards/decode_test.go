package dashboards

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// This file reads what the tests check: the rendered dashboards, decoded into the few
// fields the tests need, the metrics docs/metrics.md documents, and the recording rules
// in alerts/*.yml.

// board is the part of a dashboard's JSON the tests read.
type board struct {
	UID        string   `json:"uid"`
	Tags       []string `json:"tags"`
	Panels     []panel  `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Query string `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

// panel is the part of a panel's JSON the tests read.
type panel struct {
	ID          int    `json:"id"`
	Type        string `json:"type"`
	Title       string `json:"title"`
	Description string `json:"description"`
	Datasource  struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		Expr     string `json:"expr"`
		Exemplar bool   `json:"exemplar"`
	} `json:"targets"`
	FieldConfig struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
	Panels []panel `json:"panels"` // a row's
}

// panels returns every panel and row of b, those inside rows included.
func (b board) panels() []panel {
	var out []panel
	for _, p := range b.Panels {
		out = append(out, p)
		out = append(out, p.Panels...)
	}
	return out
}

// decoded returns every rendered dashboard, by file name.
func decoded(t *testing.T) map[string]board {
	t.Helper()
	out := map[string]board{}
	for _, f := range rendered(t) {
		var b board
		if err := json.Unmarshal(f.Data, &b); err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		out[f.Name] = b
	}
	return out
}

// promExpr is one PromQL expression of a dashboard and where it is.
type promExpr struct {
	where    string
	expr     string
	variable bool // a template variable's query
}

// allExprs returns every query of every panel and template variable.
func allExprs(t *testing.T) []promExpr {
	t.Helper()
	var out []promExpr
	for file, b := range decoded(t) {
		for _, p := range b.panels() {
			for i, q := range p.Targets {
				out = append(out, promExpr{where: fmt.Sprintf("%s: panel %q query %d", file, p.Title, i), expr: q.Expr})
			}
		}
		for _, v := range b.Templating.List {
			out = append(out, promExpr{where: fmt.Sprintf("%s: variable %s", file, v.Name), expr: v.Query, variable: true})
		}
	}
	if len(out) == 0 {
		t.Fatal("no queries")
	}
	return out
}

// metric is a documented metric's type and labels.
type metric struct {
	kind   string
	labels map[string]bool
}

// docRow is a row of a metric table in docs/metrics.md: | `name` | type | labels | ...
var docRow = regexp.MustCompile("^\\| `(slogate_[a-z0-9_]+)` \\| ([a-z]+) \\|([^|]*)\\|")

// documentedMetrics returns every metric the tables of docs/metrics.md document.
func documentedMetrics(t *testing.T) map[string]metric {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]metric{}
	for line := range strings.SplitSeq(string(data), "\n") {
		m := docRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		labels := map[string]bool{}
		for l := range strings.SplitSeq(strings.ReplaceAll(m[3], "`", ""), ",") {
			if l = strings.TrimSpace(l); l != "" && l != "—" {
				labels[l] = true
			}
		}
		out[m[1]] = metric{kind: m[2], labels: labels}
	}
	if len(out) < 50 {
		t.Fatalf("docs/metrics.md documents %d metrics in its tables; has its format changed?", len(out))
	}
	return out
}

// recordedRule matches a recording rule's name in a rules file.
var recordedRule = regexp.MustCompile(`record:\s*["']?(slogate:[a-zA-Z0-9_:]+)`)

// recordingRules returns the recording rules alerts/*.yml record.
func recordingRules(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "alerts", "*.yml"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range recordedRule.FindAllStringSubmatch(string(data), -1) {
			out[m[1]] = true
		}
	}
	return out
}
