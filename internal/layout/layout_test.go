package layout

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/slogate/slogate/"

// imports returns, for every package directory of the module (relative to its root),
// the module's packages its non-test files import.
func imports(t *testing.T) map[string][]string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		dir, _ := filepath.Rel(root, filepath.Dir(path))
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if rest, ok := strings.CutPrefix(p, module); ok {
				out[dir] = append(out[dir], rest)
			}
		}
		if _, ok := out[dir]; !ok {
			out[dir] = nil
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDependencyRules: the rules of docs/architecture.md ("Dependency rules") hold.
func TestDependencyRules(t *testing.T) {
	graph := imports(t)
	for _, want := range []string{"cmd/slogate", "sidecar", "proxy", "admission", "synth", "report", "calibrate"} {
		if _, ok := graph[want]; !ok {
			t.Fatalf("found no package %s: the walk is broken", want)
		}
	}
	under := func(dir, prefix string) bool { return dir == prefix || strings.HasPrefix(dir, prefix+"/") }
	rules := []struct {
		rule   string
		broken func(from, to string) bool
	}{
		{"wire, settings, tenant, tracing, internal/signal and internal/connqueue import no package of the module", func(from, _ string) bool {
			return from == "wire" || from == "settings" || from == "tenant" || from == "tracing" || from == "internal/signal" || from == "internal/connqueue"
		}},
		{"admission, engine, synth and exporter do not import proxy", func(from, to string) bool {
			return to == "proxy" && (from == "admission" || from == "engine" || from == "synth" || from == "exporter")
		}},
		{"synth does not import admission", func(from, to string) bool { return from == "synth" && to == "admission" }},
		{"history imports synth and report, nothing else of the module", func(from, to string) bool {
			return from == "history" && to != "synth" && to != "report"
		}},
		{"calibrate does not import report (rendering stays out of measuring)", func(from, to string) bool {
			return from == "calibrate" && to == "report"
		}},
		{"nothing imports cmd/slogate", func(_, to string) bool { return under(to, "cmd") }},
		{"only cmd/slogate imports demo", func(from, to string) bool { return to == "demo" && from != "cmd/slogate" }},
		{"only programs (cmd, demo, bench) import sidecar", func(from, to string) bool {
			return to == "sidecar" && !under(from, "cmd") && from != "demo" && !under(from, "bench")
		}},
		{"bench does not import proxy: it builds the sidecar with sidecar.New", func(from, to string) bool {
			return under(from, "bench") && to == "proxy"
		}},
		{"nothing but tests (and simnet, a test helper itself) imports the test helpers", func(from, to string) bool {
			return (to == "internal/simtest" || to == "internal/memnet" || to == "internal/simnet" || to == "internal/browser") && from != "internal/simnet"
		}},
	}
	for from, tos := range graph {
		for _, to := range tos {
			for _, r := range rules {
				if r.broken(from, to) {
					t.Errorf("%s imports %s: broken rule %q", from, to, r.rule)
				}
			}
		}
	}
}
