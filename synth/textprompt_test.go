package synth

import (
	"bytes"
	"context"
	"io"
	"math"
	"net/http"
	"testing"

	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/wire"
)

// textOnlyEngine is the simulator behind a front that refuses token-id prompts with 400,
// as an engine without them does.
func textOnlyEngine(t *testing.T, withTokenize bool) string {
	srv := runSim(t, enginesim.Config{})
	h := srv.Handler()
	return upstream(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if req, err := wire.Inspect(wire.RouteCompletions, body); err == nil && r.URL.Path == "/v1/completions" && req.Prompt.TokenIDs > 0 {
			http.Error(w, `{"error":{"message":"token-id prompts are not supported","code":400}}`, http.StatusBadRequest)
			return
		}
		if r.URL.Path == "/tokenize" && !withTokenize {
			http.NotFound(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// An engine that refuses token-id prompts gets text whose length is calibrated with its
// /tokenize, or with the usage of a completion where there is no /tokenize; requests
// then arrive within a few percent of their target length.
func TestTextPrompts(t *testing.T) {
	for _, tc := range []struct {
		name     string
		tokenize bool
	}{{"calibrated with /tokenize", true}, {"calibrated with usage", false}} {
		t.Run(tc.name, func(t *testing.T) {
			tg := &Target{BaseURL: textOnlyEngine(t, tc.tokenize), Model: "sim-tiny"}
			kind, err := tg.promptKind(context.Background())
			if err != nil || !kind.Text || !(kind.WordsPerToken > 0.2 && kind.WordsPerToken < 2) {
				t.Fatalf("prompt kind %+v, %v; want text at a sane words-per-token rate", kind, err)
			}
			for _, input := range []int{100, 1000, 3000} {
				s := tg.send(context.Background(), prompt{input: input, output: 4, seed: uint64(input), wordsPerToken: kind.WordsPerToken}, farFuture)
				if !s.Success() {
					t.Fatalf("a text prompt of %d tokens failed: %v", input, s.Failure)
				}
				if off := math.Abs(float64(s.Res.InputTokens-input)) / float64(input); off > 0.1 {
					t.Errorf("a text prompt for %d tokens had %d (%.0f%% off)", input, s.Res.InputTokens, 100*off)
				}
			}
		})
	}
	// The simulator itself takes token ids: no calibration.
	s := startSim(t, enginesim.Config{})
	if kind, err := s.target(t, "sim-tiny").promptKind(context.Background()); err != nil || kind.Text {
		t.Errorf("against an engine that takes token ids: %+v, %v", kind, err)
	}
}
