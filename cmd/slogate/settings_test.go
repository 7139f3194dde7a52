package main

import (
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/slogate/slogate/settings"
)

// schemas returns the settings of every command that has any, by command name.
func schemas() map[string][]settings.Setting {
	out := map[string][]settings.Setting{}
	for name, c := range commands {
		if c.settings != nil {
			out[name] = settings.Describe(c.settings())
		}
	}
	return out
}

// TestSettingsDescribed: every setting of every command has a flag, a SLOGATE_ variable
// and a meaning.
func TestSettingsDescribed(t *testing.T) {
	all := schemas()
	for _, name := range []string{"serve", "demo"} {
		if len(all[name]) == 0 {
			t.Errorf("slogate %s has no settings schema", name)
		}
	}
	for name, specs := range all {
		for _, s := range specs {
			if !strings.HasPrefix(s.Env, "SLOGATE_") || s.Help == "" || s.Flag == "" {
				t.Errorf("%s: setting %+v is not fully described", name, s)
			}
		}
	}
}

var updateDocs = flag.Bool("update", false, "rewrite the generated parts of docs/operations.md")

// docs/operations.md lists every setting of every command as the code declares it, one
// table per command between its markers.
func TestOperationsSettings(t *testing.T) {
	const path = "../../docs/operations.md"
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := string(doc)
	for name, specs := range schemas() {
		if want, err = settings.Splice(want, name, settings.Markdown(specs)); err != nil {
			t.Fatalf("slogate %s: %v", name, err)
		}
	}
	if *updateDocs {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if string(doc) != want {
		t.Errorf("%s is out of date with the settings schemas: run go test ./cmd/slogate -run TestOperationsSettings -update", path)
	}
}
