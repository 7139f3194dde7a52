package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/slogate/slogate/synth"
)

func reportFixtures() map[string]synth.Report {
	return map[string]synth.Report{"matrix": matrixReport(), "shapes": shapesReport(), "scan": scanReport()}
}

func TestReportJSONRoundTrip(t *testing.T) {
	for name, rep := range reportFixtures() {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteJSON(&buf, rep); err != nil {
				t.Fatal(err)
			}
			got, err := ReadJSON(&buf)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, rep) {
				t.Errorf("round trip changed the report\n got: %+v\nwant: %+v", got, rep)
			}
		})
	}
}

func TestWriteJSONSchemaAndLayout(t *testing.T) {
	rep := matrixReport()
	rep.Schema = ""
	var buf bytes.Buffer
	if err := WriteJSON(&buf, rep); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.HasPrefix(out, "{\n  \"schema\": \""+synth.SchemaVersion+"\",\n") {
		t.Errorf("the document does not open with an indented schema field:\n%.200s", out)
	}
	var raw map[string]any
	if err := json.Unmarshal(buf.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"workload", "target", "model", "engine", "kv_capacity_tokens", "started", "finished", "gate", "prefill", "cells"} {
		if _, ok := raw[key]; !ok {
			t.Errorf("no %q field", key)
		}
	}
}

func TestWriteJSONRedactsPassword(t *testing.T) {
	rep := scanReport()
	rep.Target = "http://probe:s3cret@10.0.0.7:8000"
	var buf bytes.Buffer
	if err := WriteJSON(&buf, rep); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "s3cret") {
		t.Error("the target's password is in the JSON")
	}
	if !strings.Contains(buf.String(), `"target": "http://probe:xxxxx@10.0.0.7:8000"`) {
		t.Errorf("target not redacted as expected:\n%s", buf.String())
	}
}

func TestWriteJSONNonFiniteFailsWithoutOutput(t *testing.T) {
	rep := scanReport()
	rep.Reference = math.NaN()
	var buf bytes.Buffer
	if err := WriteJSON(&buf, rep); err == nil {
		t.Fatal("a NaN figure was encoded")
	}
	if buf.Len() != 0 {
		t.Errorf("wrote %d bytes before failing", buf.Len())
	}
}

func TestReadJSONRejects(t *testing.T) {
	tests := []struct {
		name    string
		doc     string
		schema  bool     // the error wraps ErrUnknownSchema
		mention []string // the error message names these
	}{
		{"older version", `{"schema":"slogate.probe/v0","cells":[]}`, true, []string{`"slogate.probe/v0"`, synth.SchemaVersion}},
		{"newer version", `{"schema":"slogate.probe/v2","cells":{"changed":true}}`, true, []string{`"slogate.probe/v2"`, synth.SchemaVersion}},
		{"no schema", `{"cells":[]}`, true, []string{"no \"schema\" field", synth.SchemaVersion}},
		{"empty schema", `{"schema":""}`, true, []string{`""`}},
		{"not json", `<html>`, false, []string{"not JSON"}},
		{"schema not a string", `{"schema":1}`, false, []string{"not JSON"}},
		{"wrong field type", `{"schema":"` + synth.SchemaVersion + `","cells":"none"}`, false, []string{"decoding"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadJSON(strings.NewReader(tt.doc))
			if err == nil {
				t.Fatal("accepted")
			}
			if errors.Is(err, ErrUnknownSchema) != tt.schema {
				t.Errorf("errors.Is(err, ErrUnknownSchema) = %v, want %v (%v)", !tt.schema, tt.schema, err)
			}
			for _, m := range tt.mention {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not mention %s", err, m)
				}
			}
		})
	}
}

func TestReadJSONIgnoresUnknownFields(t *testing.T) {
	doc := `{"schema":"` + synth.SchemaVersion + `","model":"m","added_later":{"x":1},"cells":[{"row":"8K","state":"valid","new_figure":3}]}`
	rep, err := ReadJSON(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Model != "m" || len(rep.Cells) != 1 || rep.Cells[0].State != synth.Valid {
		t.Errorf("decoded %+v", rep)
	}
}
