package synth

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/slogate/slogate/enginesim"
)

// Without a model name, Run probes the first model the engine lists.
func TestRunDiscoversTheModel(t *testing.T) {
	s := startSim(t, enginesim.Config{})
	tg := s.target(t, "")
	rep, err := Run(context.Background(), tg, quickWorkload, Options{})
	if err != nil || rep.Model != "sim-tiny" || tg.Model != "sim-tiny" || len(rep.Cells) != 2 {
		t.Errorf("err %v, report model %q, target model %q, %d cells", err, rep.Model, tg.Model, len(rep.Cells))
	}
	if rep.Target != s.url || !strings.Contains(tg.String(), "(model sim-tiny)") {
		t.Errorf("report target %q, String %q", rep.Target, tg.String())
	}

	noModels := newTarget(t, upstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"object":"list","data":[]}`))
	}), "")
	if _, err := Run(context.Background(), noModels, quickWorkload, Options{}); err == nil || !strings.Contains(err.Error(), "lists no model") {
		t.Errorf("err = %v, want one saying the engine lists no model", err)
	}
}

// A Target without a client uses the prober's own, which keeps enough idle
// connections for a closed loop of many streams.
func TestDefaultClient(t *testing.T) {
	s := startSim(t, enginesim.Config{})
	tg := &Target{BaseURL: s.url, Model: "sim-tiny"}
	if tg.client() != probeClient || probeClient.Transport.(*http.Transport).MaxIdleConnsPerHost < 1024 {
		t.Error("not the prober's client with a large idle pool")
	}
	if smp := tg.send(context.Background(), prompt{input: 8, output: 2, seed: 1}, farFuture); !smp.Success() {
		t.Errorf("send: %v", smp.Failure)
	}
}

// A matrix whose prefill request fails says why in its prefill entry; a context no
// longer than the output is sent whole as the prompt.
func TestMatrixPrefillFailure(t *testing.T) {
	synctest.Test(t, testMatrixPrefillFailure) // the failure backoffs take no real time
}

func testMatrixPrefillFailure(t *testing.T) {
	s := startVirtualSim(t, enginesim.Config{Faults: enginesim.Faults{Status: http.StatusServiceUnavailable}})
	w := Workload{Name: "m", Kind: Matrix, Contexts: []int{8, 64}, Concurrency: []int{1, 2}, Output: 16, Requests: 1}
	var totals []int
	rep, err := Run(t.Context(), s.target(t, "sim-tiny"), w, Options{Progress: func(_, total int, _ Cell) { totals = append(totals, total) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Prefill) != 2 || rep.Prefill[0].Failure != "http_status" || rep.Prefill[0].TTFT != 0 {
		t.Errorf("prefill %+v, want failures", rep.Prefill)
	}
	if rep.Cells[0].Input != 8 || rep.Cells[2].Input != 64-16 {
		t.Errorf("inputs %d and %d, want 8 and 48", rep.Cells[0].Input, rep.Cells[2].Input)
	}
	if got := rowStates(rep); got != "8@1=rej 8@2=skipped 64@1=rej 64@2=skipped " {
		t.Errorf("cells %s", got)
	}
	if len(totals) != 4 || totals[0] != 4 {
		t.Errorf("progress totals %v, want 4 four times", totals)
	}
}

// A password in the target's URL stays out of the target's description and of the error
// that names the target; both show the URL with the password masked.
func TestTargetRedacted(t *testing.T) {
	url := upstream(t, func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", http.StatusUnauthorized) })
	tg := newTarget(t, strings.Replace(url, "http://", "http://probe:s3cret@", 1), "")
	err := tg.DiscoverModel(context.Background())
	if err == nil {
		t.Fatal("DiscoverModel succeeded against an engine that lists no model")
	}
	for what, text := range map[string]string{"String": tg.String(), "Redacted": tg.Redacted(), "the error": err.Error()} {
		if strings.Contains(text, "s3cret") || !strings.Contains(text, "probe:xxxxx@") {
			t.Errorf("%s = %q, want the URL with its password masked", what, text)
		}
	}
}

// A report's target shows with any password masked, and unchanged without one.
func TestReportRedactedTarget(t *testing.T) {
	for target, want := range map[string]string{
		"http://u:pw@h:1/x": "http://u:xxxxx@h:1/x",
		"http://h:1":        "http://h:1",
		"not a url\n":       "not a url\n",
	} {
		if got := (Report{Target: target}).RedactedTarget(); got != want {
			t.Errorf("RedactedTarget of %q = %q, want %q", target, got, want)
		}
	}
}
