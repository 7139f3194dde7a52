package settings

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Print writes specs as the settings table of a usage text: flag, variable, default,
// meaning, then the deprecated flags. A default is the schema's, never a value read
// from the environment.
func Print(w io.Writer, specs []Setting) {
	fmt.Fprintln(w, "\nSettings (a flag wins over its environment variable):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  FLAG\tVARIABLE\tDEFAULT\tMEANING")
	for _, s := range specs {
		def := s.Default
		if def == "" {
			def = `""`
		}
		fmt.Fprintf(tw, "  --%s\t%s\t%s\t%s\n", s.Flag, s.Env, def, s.Help)
	}
	tw.Flush()
	aliases := deprecated(specs)
	if len(aliases) == 0 {
		return
	}
	fmt.Fprintln(w, "\nDeprecated flags (they still work in this release):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, a := range aliases {
		fmt.Fprintf(tw, "  --%s\tuse --%s\n", a.Old, a.New)
	}
	tw.Flush()
}

// Markdown renders specs as a Markdown table (flag, variable, default, meaning),
// followed by a line naming the deprecated flags, if any.
func Markdown(specs []Setting) string {
	var b strings.Builder
	b.WriteString("| flag | environment variable | default | meaning |\n|---|---|---|---|\n")
	for _, s := range specs {
		def := "`" + s.Default + "`"
		if s.Default == "" {
			def = "(empty)"
		}
		fmt.Fprintf(&b, "| `--%s` | `%s` | %s | %s |\n", s.Flag, s.Env, def, strings.ReplaceAll(s.Help, "|", `\|`))
	}
	if aliases := deprecated(specs); len(aliases) > 0 {
		names := make([]string, len(aliases))
		for i, a := range aliases {
			names[i] = fmt.Sprintf("`--%s` (use `--%s`)", a.Old, a.New)
		}
		fmt.Fprintf(&b, "\nDeprecated flags, which still work in this release: %s.\n", strings.Join(names, ", "))
	}
	return b.String()
}

// deprecated lists the aliases of specs in their settings' order.
func deprecated(specs []Setting) []Alias {
	var out []Alias
	for _, s := range specs {
		for _, old := range s.Deprecated {
			out = append(out, Alias{Old: old, New: s.Flag})
		}
	}
	return out
}

// Markers returns the lines that open and close the generated table named name (e.g.
// a command's) in a Markdown document.
func Markers(name string) (begin, end string) {
	return "<!-- settings:" + name + ":begin (generated from the settings schema; do not edit) -->", "<!-- settings:" + name + ":end -->"
}

// Splice returns doc with the part between the markers of name replaced by table, or
// an error when doc lacks them.
func Splice(doc, name, table string) (string, error) {
	begin, end := Markers(name)
	before, rest, ok := strings.Cut(doc, begin)
	_, after, ok2 := strings.Cut(rest, end)
	if !ok || !ok2 {
		return "", fmt.Errorf("the settings markers %q and %q are missing", begin, end)
	}
	return before + begin + "\n" + table + end + after, nil
}
