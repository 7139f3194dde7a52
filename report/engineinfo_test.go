package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/slogate/slogate/synth"
)

// engineReport is a report whose engine told its version and flags, one of them hostile.
func engineReport() synth.Report {
	r := matrixReport()
	r.Engine, r.EngineVersion = "sglang", "0.5.10"
	r.EngineFlags = map[string]string{
		"tp_size": "2", "page_size": "64", "chunked_prefill_size": "8192",
		"served_model_name": "<b>x</b> | [y](z) `t` & q",
	}
	return r
}

// TestHeaderEngine: both formats name the engine with its version and list its flags in
// the header, by name, escaped; without flags they write no list.
func TestHeaderEngine(t *testing.T) {
	r := engineReport()
	t.Run("markdown", func(t *testing.T) {
		var buf bytes.Buffer
		if err := WriteMarkdown(&buf, r); err != nil {
			t.Fatal(err)
		}
		out := buf.String()
		want := "- **Engine:** sglang 0.5.10\n"
		if !strings.Contains(out, want) {
			t.Errorf("no %q in the header:\n%.600s", want, out)
		}
		flags := "- **Engine flags (4, as the engine reports them):**\n" +
			"  - chunked_prefill_size = 8192\n" +
			"  - page_size = 64\n" +
			"  - served_model_name = \\<b>x\\</b> \\| \\[y\\](z) \\`t\\` \\& q\n" +
			"  - tp_size = 2\n\n## Functional gate"
		if !strings.Contains(out, flags) {
			t.Errorf("no flag list before the gate:\n%.900s", out)
		}
	})
	t.Run("html", func(t *testing.T) {
		out, doc := writeHTML(t, r)
		if !strings.Contains(text(byID(doc, "meta")), "Enginesglang 0.5.10") {
			t.Errorf("the header does not name the engine's version: %q", text(byID(doc, "meta")))
		}
		det := byID(doc, "engine-flags")
		if det == nil || det.Data != "details" {
			t.Fatal("no details#engine-flags")
		}
		if s := find(det, elem("summary", "")); len(s) != 1 || text(s[0]) != "Engine flags (4, as the engine reports them)" {
			t.Errorf("summary %v", s)
		}
		var names, values []string
		for _, n := range find(det, elem("dt", "")) {
			names = append(names, text(n))
		}
		for _, n := range find(det, elem("dd", "")) {
			values = append(values, text(n))
		}
		if strings.Join(names, ",") != "chunked_prefill_size,page_size,served_model_name,tp_size" ||
			strings.Join(values, ",") != "8192,64,<b>x</b> | [y](z) `t` & q,2" {
			t.Errorf("flags %v = %v", names, values)
		}
		if len(find(det, elem("b", ""))) != 0 || !strings.Contains(out, "&lt;b&gt;x&lt;/b&gt;") {
			t.Error("a flag's value became markup")
		}
	})
	t.Run("none", func(t *testing.T) {
		r := matrixReport()
		var buf bytes.Buffer
		if err := WriteMarkdown(&buf, r); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(buf.String(), "Engine flags") {
			t.Error("a flag list without flags")
		}
		if _, doc := writeHTML(t, r); byID(doc, "engine-flags") != nil {
			t.Error("details#engine-flags without flags")
		}
	})
}
