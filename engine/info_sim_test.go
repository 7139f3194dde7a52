package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/slogate/slogate/enginesim"
)

// TestSimulatorInfoShape holds the simulator to the corpus of testdata/info: what it
// answers about itself has the engines' names and JSON types, so that it cannot drift
// from them. vLLM's answers are small and the simulator gives them whole: /version has
// the same keys, cache_config_info the same labels. SGLang's server info has some 350
// arguments, and the simulator gives those it models: each of its keys must be one of
// SGLang's, with SGLang's JSON type (a number as an integer or a float as SGLang writes
// it; null, an unset optional argument, matches any type), down the nested objects and
// lists.
func TestSimulatorInfoShape(t *testing.T) {
	t.Run("vllm /version", func(t *testing.T) {
		s := startSim(t, enginesim.FlavorVLLM)
		got, want := simJSON(t, s.srv.URL+"/version"), corpusJSON(t, "vllm-version.json")
		if !slices.Equal(slices.Sorted(maps.Keys(got.(map[string]any))), slices.Sorted(maps.Keys(want.(map[string]any)))) {
			t.Errorf("/version keys %v, want those of vLLM %v", got, want)
		}
		sameShape(t, "/version", got, want)
	})
	t.Run("vllm cache_config_info", func(t *testing.T) {
		s := startSim(t, enginesim.FlavorVLLM)
		got := infoLabelNames(t, simGet(t, s.srv.URL+"/metrics"))
		want := infoLabelNames(t, infoFixture(t, "vllm-cache_config_info.prom"))
		if !slices.Equal(got, want) {
			t.Errorf("labels differ from CacheConfig's:\n got %v\nwant %v", got, want)
		}
	})
	t.Run("sglang server info", func(t *testing.T) {
		s := startSim(t, enginesim.FlavorSGLang)
		want := corpusJSON(t, "sglang-server_info.json")
		for _, path := range []string{"/server_info", "/get_server_info"} {
			got := simJSON(t, s.srv.URL+path)
			sameShape(t, path, got, want)
			// What the reports rely on is there.
			doc := got.(map[string]any)
			for _, k := range []string{"version", "model_path", "tp_size", "dp_size", "max_running_requests", "chunked_prefill_size", "page_size", "context_length", "max_total_num_tokens", "internal_states"} {
				if _, ok := doc[k]; !ok {
					t.Errorf("%s has no %s", path, k)
				}
			}
		}
	})
}

// TestInfoFromSimulator reads the simulator as slogate reads an engine.
func TestInfoFromSimulator(t *testing.T) {
	for _, flavor := range []enginesim.Flavor{enginesim.FlavorVLLM, enginesim.FlavorSGLang} {
		t.Run(string(flavor), func(t *testing.T) {
			s := startSim(t, flavor)
			sc := NewScraper(ScraperConfig{BaseURL: s.srv.URL, Timeout: hangLimit})
			info, err := sc.Info(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			p := s.profile
			want := map[string]string{"block_size": strconv.Itoa(p.BlockSize), "num_gpu_blocks": strconv.Itoa(p.NumBlocks)}
			if flavor == enginesim.FlavorSGLang {
				want = map[string]string{
					"page_size": strconv.Itoa(p.BlockSize), "num_pages": strconv.Itoa(p.NumBlocks), "model_path": p.Model,
					"max_running_requests": strconv.Itoa(p.MaxNumSeqs), "tp_size": "1",
					"disable_radix_cache": strconv.FormatBool(!p.PrefixCaching),
				}
			}
			for k, v := range want {
				if info.Flags[k] != v {
					t.Errorf("flag %s = %q, want %q", k, info.Flags[k], v)
				}
			}
			if info.Version != "enginesim" {
				t.Errorf("version %q, want enginesim", info.Version)
			}
		})
	}
}

func simGet(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v", url, resp.Status, err)
	}
	return body
}

func simJSON(t *testing.T, url string) any { t.Helper(); return decodeJSON(t, simGet(t, url)) }

func corpusJSON(t *testing.T, name string) any {
	t.Helper()
	return decodeJSON(t, infoFixture(t, name))
}

func decodeJSON(t *testing.T, body []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// sameShape checks that got has want's shape: got's object keys are among want's, with
// the same JSON type; a list's items have the shape of want's first item.
func sameShape(t *testing.T, path string, got, want any) {
	t.Helper()
	if got == nil || want == nil {
		return // null: an optional value not set on one side
	}
	if g, w := jsonKind(got), jsonKind(want); g != w {
		t.Errorf("%s: JSON type %s, the engine writes %s", path, g, w)
		return
	}
	switch g := got.(type) {
	case map[string]any:
		w := want.(map[string]any)
		for _, k := range slices.Sorted(maps.Keys(g)) {
			wv, ok := w[k]
			if !ok {
				t.Errorf("%s.%s is not in the engine's answer", path, k)
				continue
			}
			sameShape(t, path+"."+k, g[k], wv)
		}
	case []any:
		w := want.([]any)
		for i, item := range g {
			if len(w) > 0 {
				sameShape(t, fmt.Sprintf("%s[%d]", path, i), item, w[0])
			}
		}
	}
}

// jsonKind names the JSON type of a value decoded with UseNumber, telling integers from
// floats (Python writes 1.0 for a float).
func jsonKind(v any) string {
	switch v := v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "list"
	case string:
		return "string"
	case bool:
		return "boolean"
	case json.Number:
		if strings.ContainsAny(v.String(), ".eE") {
			return "float"
		}
		return "integer"
	}
	return fmt.Sprintf("%T", v)
}

// infoLabelNames returns the label names of the first vllm:cache_config_info series of
// an exposition, sorted.
func infoLabelNames(t *testing.T, body []byte) []string {
	t.Helper()
	fams, err := parseExposition(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	f, ok := fams["vllm:cache_config_info"]
	if !ok || len(f.GetMetric()) == 0 {
		t.Fatal("no vllm:cache_config_info")
	}
	var names []string
	for _, lp := range f.GetMetric()[0].GetLabel() {
		names = append(names, lp.GetName())
	}
	slices.Sort(names)
	return names
}
