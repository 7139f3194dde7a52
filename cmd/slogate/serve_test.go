package main

import (
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/internal/simtest"
)

// TestServeSIGTERM runs `slogate serve` as a process, sends it SIGTERM while a stream is
// in flight, and expects the stream to finish and the process to exit 0.
func TestServeSIGTERM(t *testing.T) {
	p, _ := enginesim.LookupProfile("tiny")
	p.Timing = enginesim.Timing{StepBase: 0.005}
	up := simtest.Engine(t, enginesim.Config{Profile: p})
	data, admin := simtest.FreeAddr(t), simtest.FreeAddr(t)
	cmd := exec.Command(os.Args[0], "serve", "--upstream", up.URL, "--listen", data, "--admin-listen", admin, "--log-level", "error")
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	simtest.WaitFor(t, "slogate serve to be ready", 10*time.Second, func() bool { return simtest.Status("http://"+admin+"/readyz") == http.StatusOK })
	stream := simtest.OpenStream(t, "http://"+data, 200)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done, err := simtest.Rest(stream)
	if err != nil || !done {
		t.Errorf("the in-flight stream ended with done=%v, err=%v; want a clean [DONE]", done, err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("slogate serve exited with %v after SIGTERM, want 0; stderr:\n%s", err, stderr.String())
	}
}
