package report

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/slogate/slogate/synth"
)

// Form is one of the forms a report is written in.
type Form struct {
	Ext         string // the file extension: report.<Ext>
	ContentType string // as served over HTTP
	Write       func(io.Writer, synth.Report) error
}

// Forms are the report's three forms: JSON (the data contract ReadJSON reads back),
// Markdown and HTML.
var Forms = []Form{
	{Ext: "json", ContentType: "application/json", Write: WriteJSON},
	{Ext: "md", ContentType: "text/markdown; charset=utf-8", Write: WriteMarkdown},
	{Ext: "html", ContentType: "text/html; charset=utf-8", Write: WriteHTML},
}

// FormOf returns the form whose file name is name (report.json, report.md or
// report.html).
func FormOf(name string) (Form, bool) {
	for _, f := range Forms {
		if name == "report."+f.Ext {
			return f, true
		}
	}
	return Form{}, false
}

// WriteFiles writes r in every form into dir (created if missing) as report.json,
// report.md and report.html. A file it could not write is named in the error.
func WriteFiles(dir string, r synth.Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, form := range Forms {
		if err := writeFile(dir, "report."+form.Ext, func(w io.Writer) error { return form.Write(w, r) }); err != nil {
			return err
		}
	}
	return nil
}

// writeFile creates dir/name and fills it by write; the error names the file.
func writeFile(dir, name string, write func(io.Writer) error) error {
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		return err
	}
	err = write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	return nil
}
