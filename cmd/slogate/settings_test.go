package main

import (
	"flag"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/slogate/slogate/sidecar"
)

func TestLoadSettings(t *testing.T) {
	cases := []struct {
		name    string
		env     []string
		args    []string
		check   func(sidecar.Config) bool
		wantErr string
	}{
		{name: "defaults", check: func(s sidecar.Config) bool {
			return s.Upstream == "http://127.0.0.1:8000" && s.SLOTTFT == 2*time.Second && s.SLOTPOT == 100*time.Millisecond && s.InjectUsage && s.MaxBodyBytes == 64<<20 &&
				s.ReadHeaderTimeout == 10*time.Second && s.IdleTimeout == 2*time.Minute
		}},
		{name: "environment", env: []string{"SLOGATE_UPSTREAM=http://engine:9000", "SLOGATE_SLO_TTFT=1500ms", "SLOGATE_INJECT_USAGE=false"},
			check: func(s sidecar.Config) bool {
				return s.Upstream == "http://engine:9000" && s.SLOTTFT == 1500*time.Millisecond && !s.InjectUsage
			}},
		{name: "a flag wins over its variable", env: []string{"SLOGATE_SLO_TPOT=50ms", "SLOGATE_LISTEN=:1"},
			args: []string{"--slo-tpot", "80ms", "--inject-usage=false", "--max-body-bytes", "1024"},
			check: func(s sidecar.Config) bool {
				return s.SLOTPOT == 80*time.Millisecond && s.Listen == ":1" && !s.InjectUsage && s.MaxBodyBytes == 1024
			}},
		{name: "bad environment value", env: []string{"SLOGATE_SLO_TTFT=soon"}, wantErr: "SLOGATE_SLO_TTFT"},
		{name: "bad flag value", args: []string{"--slo-ttft", "soon"}, wantErr: "usage error"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("serve", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			var s sidecar.Config
			err := loadSettings(fs, &s, tc.env, tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one mentioning %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(s) {
				t.Errorf("settings not as expected: %+v", s)
			}
		})
	}
}

// TestSettingsDescribed: every setting has a flag, a SLOGATE_ variable and a meaning.
func TestSettingsDescribed(t *testing.T) {
	for _, s := range describeSettings(&sidecar.Config{}) {
		if !strings.HasPrefix(s.Env, "SLOGATE_") || s.Help == "" || s.Flag == "" {
			t.Errorf("setting %+v is not fully described", s)
		}
	}
}

var updateDocs = flag.Bool("update", false, "rewrite the generated part of docs/operations.md")

// docs/operations.md lists every setting of slogate serve as the code declares it.
func TestOperationsSettings(t *testing.T) {
	const path = "../../docs/operations.md"
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := withSettings(string(doc), settingsMarkdown(describeSettings(&sidecar.Config{})))
	if err != nil {
		t.Fatal(err)
	}
	if *updateDocs {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if string(doc) != want {
		t.Errorf("%s is out of date with sidecar.Config: run go test ./cmd/slogate -run TestOperationsSettings -update", path)
	}
}

func TestWithSettings(t *testing.T) {
	cases := []struct {
		name, doc, want, err string
	}{
		{"replaces", "a\n" + settingsBegin + "\nold\n" + settingsEnd + "\nb", "a\n" + settingsBegin + "\nnew\n" + settingsEnd + "\nb", ""},
		{"no markers", "a\nb", "", "markers"},
		{"no end", settingsBegin + "\nold", "", "markers"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := withSettings(tc.doc, "new\n")
			if got != tc.want || (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
				t.Errorf("withSettings = %q, %v; want %q, %q", got, err, tc.want, tc.err)
			}
		})
	}
}
