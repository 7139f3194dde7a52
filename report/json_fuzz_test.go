package report

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/slogate/slogate/synth"
)

// FuzzReadJSON feeds arbitrary documents to ReadJSON, the reader of report.json. It fails
// with a message, naming this build's schema when the schema is the reason; what it
// accepts is a report of this schema that every report writer renders without error,
// and that WriteJSON writes, ReadJSON reads back, and WriteJSON writes again
// byte for byte the same (a fixed point after one round).
func FuzzReadJSON(f *testing.F) {
	// Small seeds, one of each kind of report (the fixtures, written, are kilobytes): the
	// fuzzer minimises every input it finds new coverage with by removing ranges of its
	// bytes, which takes long for a large input when every run renders the report.
	for _, s := range []string{
		`{"schema":"slogate.probe/v1","workload":{"name":"m","kind":"matrix","contexts":[8192,32768],"concurrency":[1,4],"output":64,"duration":"30s"},` +
			`"prefill":[{"context":8192,"ttft_s":0.5,"prompt_tok_per_s":15600}],"cells":[{"row":"8K","input_tokens":4096,"output_tokens":64,"concurrency":1,"state":"valid","output_tok_per_s":62.3,"ttft_p95_s":0.8},` +
			`{"row":"32K","concurrency":4,"state":"rej","detail":"429"}]}`,
		`{"schema":"slogate.probe/v1","workload":{"name":"s","kind":"shapes","concurrency":[1,16],"shapes":[{"name":"API-S","input":2048,"output":256}]},` +
			`"gate":[{"name":"model_id","verdict":"pass"}],"cells":[{"row":"API-S","concurrency":16,"state":"looped","rounds":[{"sent":2,"succeeded":1}]}]}`,
		`{"schema":"slogate.probe/v1","workload":{"name":"r","kind":"scan","shapes":[{"name":"8K","input":8192,"output":128}],"multiples":[0.5,1.1]},"reference_rate":1.75,` +
			`"cells":[{"row":"8K","multiple":0.5,"offered_rate":0.87,"state":"valid","completion_rate":0.87,"ttft_p95_s":1.1},{"row":"8K","multiple":1.1,"offered_rate":1.9,"state":"n/c"}],"knee":{"rate":0.87,"rule":"r"}}`,
	} {
		f.Add([]byte(s))
	}
	for _, s := range []string{
		``, `null`, `[]`, `{}`, `{"schema":null}`, `{"schema":"slogate.probe/v0"}`,
		`{"schema":"slogate.probe/v1"}`,
		`{"schema":"slogate.probe/v1","target":"http://u:pw@h:1","workload":{"name":"w","kind":"scan","duration":"1m30s"},"cells":[{"rate":1e308}],"knee":{"rate":-1,"rule":"<b>"}}`,
		`{"schema":"slogate.probe/v1","workload":{"kind":"matrix","contexts":[1,1],"concurrency":[0]},"cells":[{"row":"x","concurrency":-1}]}`,
		`{"schema":"slogate.probe/v1","workload":{"duration":"1.5"}}`,
		`{"schema":"slogate.probe/v1","started":"2024-01-02T03:04:05.123+01:00","finished":"0001-01-01T00:00:00Z"}`,
		`{"schema":"slogate.probe/v1","cells":{}}`,
		`{"schema":"slogate.probe/v1","workload":{"kind":"scan"},"cells":[{"offered_rate":0.87,"state":"valid","completion_rate":0.87,"ttft_p95_s":1e306}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rep, err := ReadJSON(bytes.NewReader(data))
		if err != nil {
			msg := err.Error()
			if msg == "" || errors.Is(err, ErrUnknownSchema) && !strings.Contains(msg, synth.SchemaVersion) {
				t.Fatalf("ReadJSON error %q does not say what it read", msg)
			}
			return
		}
		if rep.Schema != synth.SchemaVersion {
			t.Fatalf("ReadJSON accepted schema %q", rep.Schema)
		}
		renderAll(t, rep)
		var first bytes.Buffer
		if err := WriteJSON(&first, rep); err != nil {
			t.Fatalf("WriteJSON of a report read from JSON: %v", err)
		}
		again, err := ReadJSON(bytes.NewReader(first.Bytes()))
		if err != nil {
			t.Fatalf("ReadJSON of WriteJSON's output: %v\n%s", err, first.Bytes())
		}
		var second bytes.Buffer
		if err := WriteJSON(&second, again); err != nil {
			t.Fatalf("WriteJSON, second round: %v", err)
		}
		if !bytes.Equal(first.Bytes(), second.Bytes()) {
			t.Fatalf("the report changed in a round trip:\n%s\nthen\n%s", first.Bytes(), second.Bytes())
		}
	})
}

// renderAll renders rep with every report writer, which must not fail on a discarding
// writer.
func renderAll(t *testing.T, rep synth.Report) {
	t.Helper()
	for name, write := range map[string]func(io.Writer, synth.Report) error{
		"WriteMarkdown": WriteMarkdown, "WriteHTML": WriteHTML, "WriteHeatmap": WriteHeatmap,
		"WriteScanCharts": func(w io.Writer, r synth.Report) error { return WriteScanCharts(w, r, "p-") },
	} {
		if err := write(io.Discard, rep); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
}
