package synth

import (
	"context"
	"errors"
	"testing"

	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/wire"
)

// TestSendEachRoute probes every generation route against the simulator of the engine
// that serves it, with the same success rules, and checks each route's failure.
func TestSendEachRoute(t *testing.T) {
	vllm := startSim(t, enginesim.Config{})
	sglang := startSim(t, enginesim.Config{Flavor: enginesim.FlavorSGLang})
	const input, output = 24, 12
	for _, tc := range []struct {
		name    string
		sim     *sim
		route   wire.Route
		faults  string
		want    Failure
		outcome measure.Outcome
	}{
		{"completions", vllm, wire.RouteCompletions, "", NoFailure, measure.OK},
		{"chat", vllm, wire.RouteChatCompletions, "", NoFailure, measure.OK},
		{"responses", vllm, wire.RouteResponses, "", NoFailure, measure.OK},
		{"generate", sglang, wire.RouteGenerate, "", NoFailure, measure.OK},
		{"chat, error event", vllm, wire.RouteChatCompletions, "error_after=3", EngineError, measure.EngineError},
		// vLLM cannot send a generation error as a Responses event: the stream breaks off.
		{"responses, generation error", vllm, wire.RouteResponses, "error_after=3", Transport, measure.AbortedMidstream},
		{"generate, abort", sglang, wire.RouteGenerate, "error_after=3", EngineError, measure.EngineError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg := tc.sim.target(t, "sim-tiny")
			if tc.faults != "" {
				tg = faulty(tg, tc.faults)
			}
			tg.Route = tc.route
			smp := tg.send(context.Background(), prompt{route: tg.Route, input: input, output: output, seed: 3}, farFuture)
			r := smp.Res
			if smp.Failure != tc.want || r.Outcome != tc.outcome || r.Route != tc.route {
				t.Fatalf("failure %v, outcome %v, route %v; want %v, %v, %v (sample %+v)", smp.Failure, r.Outcome, r.Route, tc.want, tc.outcome, tc.route, smp)
			}
			if tc.want != NoFailure {
				return
			}
			if r.OutputTokens != output || r.Tokens != measure.TokensUsage || r.InputTokens <= 0 || !r.Ended {
				t.Errorf("tokens %d (%v), input %d, ended %v", r.OutputTokens, r.Tokens, r.InputTokens, r.Ended)
			}
			if r.TTFT <= 0 || r.TPOT <= 0 || smp.Text == "" || smp.WindowTokens != output {
				t.Errorf("TTFT %v TPOT %v text %q window tokens %d", r.TTFT, r.TPOT, smp.Text, smp.WindowTokens)
			}
		})
	}
}

func TestWorkloadRoute(t *testing.T) {
	for _, tc := range []struct {
		route string
		want  wire.Route
		err   bool
	}{
		{"", wire.RouteCompletions, false},
		{"chat", wire.RouteChatCompletions, false},
		{"responses", wire.RouteResponses, false},
		{"generate", wire.RouteGenerate, false},
		{"embeddings", 0, true},
		{"Responses", 0, true},
	} {
		t.Run(tc.route, func(t *testing.T) {
			yaml := "name: w\nkind: shapes\nshapes: [{name: s, input: 16, output: 8}]\nconcurrency: [1]\nrequests: 1\nrounds: 1\n"
			if tc.route != "" {
				yaml += "route: " + tc.route + "\n"
			}
			w, err := ParseWorkload([]byte(yaml))
			if (err != nil) != tc.err || err != nil && !errors.Is(err, ErrInvalidWorkload) {
				t.Fatalf("ParseWorkload: %v, want error %v", err, tc.err)
			}
			if err != nil {
				return
			}
			if got, _ := ParseRoute(w.Route); got != tc.want {
				t.Errorf("route %v, want %v", got, tc.want)
			}
		})
	}
}

// A workload's route sends every request of its run to that route.
func TestRunWorkloadRoute(t *testing.T) {
	for _, tc := range []struct {
		route  string
		flavor enginesim.Flavor
	}{
		{"responses", enginesim.FlavorVLLM},
		{"generate", enginesim.FlavorSGLang},
		{"chat", enginesim.FlavorSGLang},
	} {
		t.Run(tc.route, func(t *testing.T) {
			s := startSim(t, enginesim.Config{Flavor: tc.flavor})
			w := Workload{Name: "r", Kind: Shapes, Route: tc.route, Shapes: []Shape{{"S", 64, 8}}, Concurrency: []int{2}, Requests: 2, Rounds: 1}
			rep, err := Run(context.Background(), s.target(t, "sim-tiny"), w, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Cells) != 1 || rep.Cells[0].State != Valid {
				t.Fatalf("cells %+v", rep.Cells)
			}
			route, _ := ParseRoute(tc.route)
			if n := s.wire.served(routePath(route)); n < 4 {
				t.Errorf("%d requests reached %s, want the round's 4 and its warm-up", n, routePath(route))
			}
		})
	}
}
