package main

import (
	"flag"
	"os"
	"sort"
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
	for _, name := range []string{"serve", "demo", "sim", "probe", "calibrate"} {
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

// differentFlags are flags that two commands have with different variables, because
// they mean different things there.
var differentFlags = map[string]string{
	"calibrate": "serve's enables the sidecar's calibrations (SLOGATE_CALIBRATE); demo's its short demo schedule (SLOGATE_DEMO_CALIBRATE)",
}

// TestSettingsConsistent: across the commands a variable always goes with one flag, and a
// flag with one variable, so that a name means one thing wherever slogate reads it.
func TestSettingsConsistent(t *testing.T) {
	flagOf, envOf := map[string]string{}, map[string]string{}
	where := map[string]string{}
	all := schemas()
	names := make([]string, 0, len(all))
	for name := range all {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		for _, s := range all[name] {
			if f, ok := flagOf[s.Env]; ok && f != s.Flag {
				t.Errorf("%s is --%s in %s but --%s in %s", s.Env, f, where[s.Env], s.Flag, name)
			}
			if e, ok := envOf[s.Flag]; ok && e != s.Env && differentFlags[s.Flag] == "" {
				t.Errorf("--%s is %s in %s but %s in %s", s.Flag, e, where["--"+s.Flag], s.Env, name)
			}
			flagOf[s.Env], envOf[s.Flag] = s.Flag, s.Env
			where[s.Env], where["--"+s.Flag] = name, name
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
