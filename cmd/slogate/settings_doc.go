package main

import (
	"fmt"
	"strings"
)

// The settings reference in docs/operations.md is generated from sidecar.Config, so that
// it cannot drift from what slogate reads: TestOperationsSettings fails when the file
// differs, and `go test ./cmd/slogate -run TestOperationsSettings -update` rewrites it.

// Markers around the generated part of docs/operations.md.
const (
	settingsBegin = "<!-- settings:begin (generated from cmd/slogate/serve.go; do not edit) -->"
	settingsEnd   = "<!-- settings:end -->"
)

// settingsMarkdown renders specs as a Markdown table: flag, variable, default, meaning.
func settingsMarkdown(specs []setting) string {
	var b strings.Builder
	b.WriteString("| flag | environment variable | default | meaning |\n|---|---|---|---|\n")
	for _, s := range specs {
		def := "`" + s.Default + "`"
		if s.Default == "" {
			def = "(empty)"
		}
		fmt.Fprintf(&b, "| `--%s` | `%s` | %s | %s |\n", s.Flag, s.Env, def, strings.ReplaceAll(s.Help, "|", `\|`))
	}
	return b.String()
}

// withSettings returns doc with the part between the settings markers replaced by
// table, or an error when doc lacks the markers.
func withSettings(doc, table string) (string, error) {
	before, rest, ok := strings.Cut(doc, settingsBegin)
	_, after, ok2 := strings.Cut(rest, settingsEnd)
	if !ok || !ok2 {
		return "", fmt.Errorf("the settings markers %q and %q are missing", settingsBegin, settingsEnd)
	}
	return before + settingsBegin + "\n" + table + settingsEnd + after, nil
}
