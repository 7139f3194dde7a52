package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/slogate/slogate/synth"
)

// ErrUnknownSchema is returned (wrapped) by ReadJSON for a document that is not a probe
// report of synth.SchemaVersion.
var ErrUnknownSchema = errors.New("report: unknown report schema")

// maxReportJSON bounds what ReadJSON reads: a full 1,024-cell report with a few rounds
// per cell is well under 16 MiB.
const maxReportJSON = 64 << 20

// WriteJSON writes r as indented JSON (encoding/json) with its schema field set to
// synth.SchemaVersion, whatever r.Schema held. A password in the target URL is
// redacted; every other field is written as it is. The document goes to w in a single
// Write, so w gets nothing when encoding fails (a NaN or infinite figure, for instance).
func WriteJSON(w io.Writer, r synth.Report) error {
	r.Schema = synth.SchemaVersion
	r.Target = r.RedactedTarget()
	return writeIndented(w, r, "the report")
}

// writeIndented writes v to w as indented JSON, HTML characters unescaped, in a single
// Write: w gets nothing when encoding fails. what names v in the error.
func writeIndented(w io.Writer, v any, what string) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("report: encoding %s as JSON: %w", what, err)
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// ReadJSON reads a report written by WriteJSON. It rejects, with an error wrapping
// ErrUnknownSchema that names both versions, a document whose schema field is missing
// or differs from synth.SchemaVersion; fields it does not know are ignored, since a
// schema version only changes when a field changes meaning or goes away.
func ReadJSON(r io.Reader) (synth.Report, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxReportJSON+1))
	if err != nil {
		return synth.Report{}, fmt.Errorf("report: reading a report: %w", err)
	}
	if len(data) > maxReportJSON {
		return synth.Report{}, fmt.Errorf("report: a report larger than %d bytes", maxReportJSON)
	}
	var head struct {
		Schema *string `json:"schema"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return synth.Report{}, fmt.Errorf("report: a report is not JSON: %w", err)
	}
	switch {
	case head.Schema == nil:
		return synth.Report{}, fmt.Errorf("%w: no \"schema\" field, so not a slogate probe report (this build reads %q)", ErrUnknownSchema, synth.SchemaVersion)
	case *head.Schema != synth.SchemaVersion:
		return synth.Report{}, fmt.Errorf("%w: %q (this build reads %q)", ErrUnknownSchema, *head.Schema, synth.SchemaVersion)
	}
	var rep synth.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		return synth.Report{}, fmt.Errorf("report: decoding a %s report: %w", synth.SchemaVersion, err)
	}
	return rep, nil
}
