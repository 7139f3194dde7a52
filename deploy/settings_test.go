package deploy

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/slogate/slogate/settings"
	"github.com/slogate/slogate/sidecar"
)

// This file reads the settings `slogate serve` knows from its settings schema
// (sidecar.Config), so the manifests are checked against the code and not against a copy
// of its list.

// serveSchema names the schema of serve's settings in messages.
const serveSchema = "sidecar.Config"

// setting is one setting of serve: its variable, default and Go type.
type setting struct {
	Env, Default, Type string
}

// serveSettings returns the settings of `slogate serve` by environment variable.
func serveSettings(t *testing.T) map[string]setting {
	t.Helper()
	out := map[string]setting{}
	for _, s := range settings.Describe(&sidecar.Config{}) {
		out[s.Env] = setting{Env: s.Env, Default: s.Default, Type: s.Type}
	}
	if len(out) < 10 {
		t.Fatalf("%s: found only %d settings", serveSchema, len(out))
	}
	return out
}

// checkValue reports whether value is valid for a setting of Go type typ, as the
// environment parser (caarlos0/env) reads it.
func checkValue(typ, value string) error {
	var err error
	switch typ {
	case "string":
	case "bool":
		_, err = strconv.ParseBool(value)
	case "int", "int64":
		_, err = strconv.ParseInt(value, 10, 64)
	case "float64":
		_, err = strconv.ParseFloat(value, 64)
	case "time.Duration":
		_, err = time.ParseDuration(value)
	default:
		err = fmt.Errorf("the test does not know the type %s; teach checkValue", typ)
	}
	return err
}

// listenPort returns the port of a listen address such as ":8080".
func listenPort(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("listen address %q: %v", addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("listen address %q: %v", addr, err)
	}
	return n
}

func TestServeSettingsParsed(t *testing.T) {
	s := serveSettings(t)
	for _, env := range []string{"SLOGATE_UPSTREAM", "SLOGATE_LISTEN", "SLOGATE_ADMIN_LISTEN", "SLOGATE_DRAIN_TIMEOUT", "SLOGATE_TIERS_FILE", "SLOGATE_DCGM"} {
		if _, ok := s[env]; !ok {
			t.Errorf("%s is not among the settings read from %s", env, serveSchema)
		}
	}
	for _, v := range s {
		if v.Default != "" {
			if err := checkValue(v.Type, v.Default); err != nil {
				t.Errorf("%s: default %q: %v", v.Env, v.Default, err)
			}
		}
	}
}

// slogateVar matches a slogate environment variable's name in any text.
var slogateVar = regexp.MustCompile(`\bSLOGATE_[A-Z0-9_]*[A-Z0-9]\b`)

// TestEveryVariableNamedExists checks every SLOGATE_* name in deploy/ (manifests, comments
// and README) against the settings slogate reads, so that no manifest sets, and no text
// mentions, a variable slogate ignores.
func TestEveryVariableNamedExists(t *testing.T) {
	known := serveSettings(t)
	var unknown sets.Set[string] = sets.New[string]()
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if ext := filepath.Ext(path); ext != ".yaml" && ext != ".yml" && ext != ".md" {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, name := range slogateVar.FindAllString(string(data), -1) {
			if _, ok := known[name]; !ok {
				unknown.Insert(path + ": " + name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if unknown.Len() > 0 {
		t.Errorf("slogate serve reads no such variable (%s):\n%s", serveSchema, strings.Join(sets.List(unknown), "\n"))
	}
}
