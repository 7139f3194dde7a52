package main

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/calibrate"
	"github.com/slogate/slogate/internal/simtest"
)

// The credentials a probe or a calibration works with — the engine's API key, a password
// in the engine's URL, the admin token and the sidecar's own probe key — reach nothing
// they produce: the sidecar's probe and calibration reports in every form the admin
// listener serves, with its logs, metrics and status page after them; the files and
// output of `slogate probe` and `slogate calibrate`; and those commands' and serve's
// usage text, with the key and a password in the engine's URL in the environment.
func TestSecretsInReports(t *testing.T) {
	c := simtest.NewCredentials(t)
	key, password, secrets := c.Key, c.Password, c.All()
	probeFile, tiersFile, p := c.ProbeFile, c.TiersFile, c.Profile
	calibrateArgs := []string{"--tiers-file", tiersFile, "--calibrate-round", "1s", "--calibrate-output", "8", "--slo-ttft", "400ms"}

	t.Run("usage text", func(t *testing.T) { // not parallel: it sets the environment
		t.Setenv("SLOGATE_UPSTREAM_API_KEY", key)
		t.Setenv("SLOGATE_UPSTREAM", "http://probe:"+password+"@127.0.0.1:1")
		for _, cmd := range []string{"probe", "calibrate", "serve"} {
			for _, args := range [][]string{{cmd, "--no-such-flag"}, {"help", cmd}, {cmd, "--slo-ttft", "soon"}} {
				var out bytes.Buffer
				run(context.Background(), args, &out, &out)
				if !strings.Contains(out.String(), "--upstream-api-key") {
					t.Fatalf("slogate %s printed no usage text:\n%s", strings.Join(args, " "), out.String())
				}
				simtest.NoSecrets(t, "the output of slogate "+strings.Join(args, " "), out.String(), secrets)
			}
		}
	})

	t.Run("probe command", func(t *testing.T) {
		t.Parallel()
		engine, keyed := simtest.KeyedEngine(t, p, key)
		out := t.TempDir()
		args := []string{"probe", "--upstream", "http://probe:" + password + "@" + engine, "--upstream-api-key", key, "--workload", probeFile, "--out", out}
		_ = checkCommand(t, args, out, secrets)
		if keyed.Load() == 0 {
			t.Error("no probe request carried the engine's API key")
		}
	})

	t.Run("calibrate command", func(t *testing.T) {
		t.Parallel()
		engine, keyed := simtest.KeyedEngine(t, p, key)
		out := t.TempDir()
		args := append([]string{"calibrate", "--upstream", "http://probe:" + password + "@" + engine, "--upstream-api-key", key, "--out", filepath.Join(out, "tiers.yaml")}, calibrateArgs...)
		printed := checkCommand(t, args, out, secrets)
		if keyed.Load() == 0 {
			t.Error("no calibration request carried the engine's API key")
		}
		// It prints the engines' own caps the calibration it wrote implies.
		cfg, err := admission.LoadConfig(filepath.Join(out, "tiers.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		o, ok := calibrate.FromConfig(cfg)
		if !ok {
			t.Fatal("the tiers file records no calibration")
		}
		caps := o.Result.EngineCaps()
		for _, want := range []string{"vllm serve ... " + strings.Join(caps.VLLM(), " "), "sglang.launch_server ... " + strings.Join(caps.SGLang(), " ")} {
			if caps.VLLM() == nil || !strings.Contains(printed, want) {
				t.Errorf("slogate calibrate did not print %q:\n%s", want, printed)
			}
		}
		// And vLLM's --long-prefill-token-threshold exactly when the tiers call for it.
		n, _ := o.Result.LongPrefillThreshold()
		if got := strings.Contains(printed, "--long-prefill-token-threshold "+strconv.Itoa(n)); got != (n > 0) || n == 0 && strings.Contains(printed, "--long-prefill-token-threshold") {
			t.Errorf("advised threshold %d, printed it %v:\n%s", n, got, printed)
		}
	})
}

// checkCommand runs slogate with args, which must succeed, and checks its output and
// every file it wrote under dir for the secrets.
func checkCommand(t *testing.T, args []string, dir string, secrets []string) (stdout string) {
	t.Helper()
	var out, stderr bytes.Buffer
	if code := run(context.Background(), args, &out, &stderr); code != 0 {
		t.Fatalf("slogate %s exited %d:\n%s", args[0], code, stderr.String())
	}
	simtest.NoSecrets(t, "slogate "+args[0]+"'s output", out.String()+stderr.String(), secrets)
	files := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		simtest.NoSecrets(t, path, string(b), secrets)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Errorf("slogate %s wrote nothing under %s", args[0], dir)
	}
	t.Logf("slogate %s: %d files checked", args[0], files)
	return out.String()
}
