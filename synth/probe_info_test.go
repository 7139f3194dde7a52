package synth

import (
	"net/http"
	"strconv"
	"testing"
	"testing/synctest"

	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/internal/simnet"
)

// TestRunRecordsEngine: a report says how the engine ran, its version and flags as the
// engine reports them, through the target's transport; an engine that tells nothing
// leaves them out without failing the run. On virtual time (virtual_test.go).
func TestRunRecordsEngine(t *testing.T) {
	p := simProfile(t, "tiny", nil)
	w := Workload{Name: "info", Kind: Matrix, Contexts: []int{256}, Concurrency: []int{1}, Output: 8, Requests: 1}
	cases := []struct {
		name    string
		flavor  enginesim.Flavor
		hide    map[string]bool // paths answered 404
		version string
		flags   map[string]string
	}{
		{"vllm", enginesim.FlavorVLLM, nil, "enginesim", map[string]string{"block_size": strconv.Itoa(p.BlockSize), "num_gpu_blocks": strconv.Itoa(p.NumBlocks)}},
		{"sglang", enginesim.FlavorSGLang, nil, "enginesim", map[string]string{"page_size": strconv.Itoa(p.BlockSize), "max_running_requests": strconv.Itoa(p.MaxNumSeqs), "tp_size": "1"}},
		{"vllm without /version", enginesim.FlavorVLLM, map[string]bool{"/version": true}, "", map[string]string{"block_size": strconv.Itoa(p.BlockSize)}},
		{"no metrics", enginesim.FlavorVLLM, map[string]bool{"/metrics": true}, "", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				_, ms := simnet.Start(t, enginesim.Config{Profile: p, Flavor: tc.flavor}, func(h http.Handler) http.Handler {
					return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						if tc.hide[r.URL.Path] {
							http.NotFound(w, r)
							return
						}
						h.ServeHTTP(w, r)
					})
				})
				rep, err := Run(t.Context(), &Target{BaseURL: ms.URL, Model: p.Model, Client: ms.Client}, w, Options{})
				if err != nil {
					t.Fatal(err)
				}
				if rep.EngineVersion != tc.version {
					t.Errorf("engine version %q, want %q", rep.EngineVersion, tc.version)
				}
				if tc.flags == nil && rep.EngineFlags != nil {
					t.Errorf("engine flags %v, want none", rep.EngineFlags)
				}
				for k, v := range tc.flags {
					if rep.EngineFlags[k] != v {
						t.Errorf("engine flag %s = %q, want %q", k, rep.EngineFlags[k], v)
					}
				}
				if len(rep.Cells) != 1 || rep.Cells[0].State != Valid {
					t.Errorf("cells %+v, want one valid", rep.Cells)
				}
			})
		})
	}
}
