package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// commandCase is one run of slogate: its arguments, the exit code it must end with, and
// substrings its stdout and stderr must hold.
type commandCase struct {
	name   string
	args   []string
	code   int
	stdout []string
	stderr []string
}

// runCommandCases runs each case as a subtest of t.
func runCommandCases(t *testing.T, cases []commandCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), tc.args, &stdout, &stderr); code != tc.code {
				t.Errorf("exit code %d, want %d (stderr %q)", code, tc.code, stderr.String())
			}
			for _, s := range tc.stdout {
				if !strings.Contains(stdout.String(), s) {
					t.Errorf("stdout lacks %q:\n%s", s, stdout.String())
				}
			}
			for _, s := range tc.stderr {
				if !strings.Contains(stderr.String(), s) {
					t.Errorf("stderr lacks %q:\n%s", s, stderr.String())
				}
			}
		})
	}
}

func TestDispatch(t *testing.T) {
	runCommandCases(t, []commandCase{
		{name: "no command", args: nil, code: 2, stderr: []string{"Usage: slogate <command>"}},
		{name: "help lists commands", args: []string{"help"}, code: 0, stdout: []string{"sim", "version", "demo"}},
		{name: "unknown command", args: []string{"frobnicate"}, code: 2, stderr: []string{`unknown command "frobnicate"`}},
		{name: "version", args: []string{"version"}, code: 0, stdout: []string{"slogate "}},
		{name: "version rejects arguments", args: []string{"version", "extra"}, code: 2, stderr: []string{"unexpected arguments"}},
		{name: "help for sim says it is a model", args: []string{"help", "sim"}, code: 0, stderr: []string{"MODEL of an LLM inference engine", "h200-9b", "h20x8-flash", "tiny"}},
		{name: "sim bad flag", args: []string{"sim", "--no-such-flag"}, code: 2, stderr: []string{"flag provided but not defined"}},
		{name: "sim unknown profile", args: []string{"sim", "--profile", "nope"}, code: 1, stderr: []string{`unknown profile "nope"`}},
		{name: "sim bad faults", args: []string{"sim", "--faults", "explode"}, code: 1, stderr: []string{"bad fault directive"}},
		{name: "sim bad flavor", args: []string{"sim", "--flavor", "tgi", "--listen", "127.0.0.1:0"}, code: 1, stderr: []string{`unknown flavor "tgi"`}},
		{name: "demo bad streams", args: []string{"demo", "--streams", "0"}, code: 1, stderr: []string{"want at least 1"}},
		{name: "serve bad upstream", args: []string{"serve", "--upstream", "not a url"}, code: 1, stderr: []string{"want an absolute URL"}},
		{name: "serve bad engine", args: []string{"serve", "--engine", "tgi"}, code: 1, stderr: []string{`unknown engine "tgi"`}},
		{name: "serve help lists settings", args: []string{"help", "serve"}, code: 0, stderr: []string{"SLOGATE_UPSTREAM", "SLOGATE_SLO_TTFT", "--admin-listen"}},
		{name: "demo help lists settings", args: []string{"demo", "-h"}, code: 0, stderr: []string{"slogate demo runs", "--profile", "SLOGATE_SIM_PROFILE", "SLOGATE_DEMO_LOAD"}},
		{name: "sim help lists settings", args: []string{"sim", "-h"}, code: 0, stderr: []string{"--listen", "SLOGATE_LISTEN", "127.0.0.1:8000", "--prefix-caching", "--log-level"}},
		{name: "probe help lists settings", args: []string{"probe", "-h"}, code: 0, stderr: []string{
			"Usage: slogate probe --upstream URL", "--upstream-api-key", "SLOGATE_UPSTREAM_API_KEY", "--push-url", "context-matrix",
			"Deprecated flags", "--target", "use --upstream", "--api-key"}},
		{name: "calibrate help lists settings", args: []string{"calibrate", "-h"}, code: 0, stderr: []string{
			"Usage: slogate calibrate --upstream URL", "--slo-ttft", "2s", "--calibrate-output", "128", "--calibrate-round", "60s",
			"Deprecated flags", "--output", "use --calibrate-output", "--round", "use --calibrate-round", "--target"}},
		{name: "probe's old flags still work", args: []string{"probe", "--target", "http://127.0.0.1:1", "--api-key", "k", "--workload", "nope"}, code: 1,
			stderr: []string{"--target is deprecated and goes in the next release; use --upstream", "--api-key is deprecated", "use --upstream-api-key", "nope"}},
		{name: "calibrate's old flags still work", args: []string{"calibrate", "--output", "8", "--round", "1s", "--tiers-file", "/nonexistent/tiers.yaml"}, code: 1,
			stderr: []string{"--output is deprecated and goes in the next release; use --calibrate-output", "use --calibrate-round", "/nonexistent/tiers.yaml"}},
		{name: "sim bad prefix caching", args: []string{"sim", "--prefix-caching", "maybe"}, code: 1, stderr: []string{"--prefix-caching"}},
	})
}
