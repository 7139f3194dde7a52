package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// infoFixture returns the contents of testdata/info/name.
func infoFixture(t testing.TB, name string) []byte {
	t.Helper()
	return fixture(t, filepath.Join("info", name))
}

// route is one answer of a test engine: a status and a body.
type route struct {
	status int
	body   []byte
}

// infoEngine serves routes over HTTP for the test; any other path is 404. It records the
// Authorization header of every request.
func infoEngine(t *testing.T, routes map[string]route) (*httptest.Server, *[]string) {
	t.Helper()
	var auth []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = append(auth, r.Header.Get("Authorization"))
		rt, ok := routes[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		if rt.status == 0 {
			rt.status = http.StatusOK
		}
		w.WriteHeader(rt.status)
		_, _ = w.Write(rt.body)
	}))
	t.Cleanup(srv.Close)
	return srv, &auth
}

func readInfo(t *testing.T, base string, kind Kind) (Info, error) {
	t.Helper()
	sc := NewScraper(ScraperConfig{BaseURL: base, Kind: kind, Timeout: hangLimit, APIKey: "k-test"})
	ctx, cancel := context.WithTimeout(context.Background(), hangLimit)
	defer cancel()
	return sc.Info(ctx)
}

// TestInfoCorpus reads the engines' answers of testdata/info as Info keeps them.
func TestInfoCorpus(t *testing.T) {
	t.Run("vllm", func(t *testing.T) {
		srv, auth := infoEngine(t, map[string]route{
			"/metrics": {body: infoFixture(t, "vllm-cache_config_info.prom")},
			"/version": {body: infoFixture(t, "vllm-version.json")},
		})
		info, err := readInfo(t, srv.URL, KindAuto)
		if err != nil {
			t.Fatal(err)
		}
		if info.Version != "0.11.0" {
			t.Errorf("version %q, want 0.11.0", info.Version)
		}
		want := map[string]string{
			"block_size": "16", "cache_dtype": "fp8", "num_gpu_blocks": "41286", "kv_cache_size_tokens": "660576",
			"enable_prefix_caching": "True", "gpu_memory_utilization": "0.9", "num_cpu_blocks": "None",
			"kv_cache_dtype_skip_layers": "[]", "_block_size_resolved": "True",
		}
		for k, v := range want {
			if info.Flags[k] != v {
				t.Errorf("flag %s = %q, want %q", k, info.Flags[k], v)
			}
		}
		if _, ok := info.Flags["engine"]; ok {
			t.Error("the engine label (the DP index) is kept as a setting")
		}
		if len(info.Flags) != 35 {
			t.Errorf("%d flags, want the 35 fields of CacheConfig: %v", len(info.Flags), slices.Sorted(maps.Keys(info.Flags)))
		}
		for _, a := range *auth {
			if a != "Bearer k-test" {
				t.Errorf("Authorization %q, want the API key", a)
			}
		}
	})
	t.Run("sglang", func(t *testing.T) {
		srv, _ := infoEngine(t, map[string]route{
			"/metrics":     {body: fixture(t, "sglang_cache_config.prom")},
			"/server_info": {body: infoFixture(t, "sglang-server_info.json")},
		})
		info, err := readInfo(t, srv.URL, KindAuto)
		if err != nil {
			t.Fatal(err)
		}
		if info.Version != "0.5.10" {
			t.Errorf("version %q, want 0.5.10", info.Version)
		}
		want := map[string]string{
			"model_path": "Qwen/Qwen3-32B", "tp_size": "2", "dp_size": "1", "page_size": "64", "num_pages": "5120",
			"chunked_prefill_size": "8192", "max_running_requests": "256", "context_length": "32768",
			"mem_fraction_static": "0.88", "schedule_conservativeness": "1.0", "disable_radix_cache": "false",
			"max_total_num_tokens": "1054720", "max_req_input_len": "32762", "torchao_config": "",
			"uvicorn_access_log_exclude_prefixes": "[]", "offload_group_size": "-1",
			"cuda_graph_bs": "[1,2,4,8,12,16,24,32,40,48,56,64,72,80,88,96,104,112,120,128,136,144,152,160,168,176,184,192,200,208,216,224,232,240,248,256]",
		}
		for k, v := range want {
			if got, ok := info.Flags[k]; !ok || got != v {
				t.Errorf("flag %s = %q (present %v), want %q", k, got, ok, v)
			}
		}
		for _, k := range []string{
			"version", "status", "internal_states", // not settings
			"api_key", "admin_api_key", "ssl_keyfile_password", // credentials (null here)
			"quantization", "speculative_algorithm", // null: not set
			"model_loader_extra_config", "json_model_override_args", // JSON objects in text
			"mm_process_config", // an object
		} {
			if v, ok := info.Flags[k]; ok {
				t.Errorf("flag %s = %q kept", k, v)
			}
		}
	})
}

// TestInfoEndpoints covers the engines' releases and failures: a missing endpoint adds
// nothing and is no error; any other failure is an error beside what was read.
func TestInfoEndpoints(t *testing.T) {
	vllmMetrics := route{body: []byte("vllm:cache_config_info{block_size=\"16\",engine=\"0\"} 1\n")}
	sglangInfo := route{body: []byte(`{"tp_size":4,"version":"0.4.9"}`)}
	cases := []struct {
		name    string
		kind    Kind
		routes  map[string]route
		version string
		flags   map[string]string
		err     error // nil: no error
	}{
		{"vLLM without /version", KindAuto, map[string]route{"/metrics": vllmMetrics}, "", map[string]string{"block_size": "16"}, nil},
		{"vLLM /version 405", KindVLLM, map[string]route{"/metrics": vllmMetrics, "/version": {status: 405}}, "", map[string]string{"block_size": "16"}, nil},
		{"vLLM /version failing", KindAuto, map[string]route{"/metrics": vllmMetrics, "/version": {status: 500}}, "", map[string]string{"block_size": "16"}, ErrStatus},
		{"vLLM /version not JSON", KindAuto, map[string]route{"/metrics": vllmMetrics, "/version": {body: []byte("0.11.0")}}, "", map[string]string{"block_size": "16"}, ErrInfo},
		{"vLLM version not a string", KindAuto, map[string]route{"/metrics": vllmMetrics, "/version": {body: []byte(`{"version":11}`)}}, "", map[string]string{"block_size": "16"}, ErrInfo},
		{"vLLM version null", KindAuto, map[string]route{"/metrics": vllmMetrics, "/version": {body: []byte(`{"version":null}`)}}, "", map[string]string{"block_size": "16"}, nil},
		{"vLLM /metrics failing, kind configured", KindVLLM, map[string]route{"/metrics": {status: 503}, "/version": {body: []byte(`{"version":"0.9.2"}`)}}, "0.9.2", nil, ErrStatus},
		{"SGLang before /server_info", KindSGLang, map[string]route{"/get_server_info": sglangInfo}, "0.4.9", map[string]string{"tp_size": "4"}, nil},
		{"SGLang /server_info preferred", KindSGLang, map[string]route{"/server_info": sglangInfo, "/get_server_info": {status: 500}}, "0.4.9", map[string]string{"tp_size": "4"}, nil},
		{"SGLang without either", KindSGLang, nil, "", nil, nil},
		{"SGLang server info not an object", KindSGLang, map[string]route{"/server_info": {body: []byte(`[1]`)}}, "", nil, ErrInfo},
		{"SGLang server info null", KindSGLang, map[string]route{"/server_info": {body: []byte(`null`)}}, "", nil, ErrInfo},
		{"SGLang version too long", KindSGLang, map[string]route{"/server_info": {body: []byte(`{"version":"` + strings.Repeat("9", maxVersion+1) + `"}`)}}, "", nil, ErrInfo},
		{"SGLang server info too large", KindSGLang, map[string]route{"/server_info": {body: []byte(`{"x":"` + strings.Repeat("a", maxServerInfo) + `"}`)}}, "", nil, ErrTooLarge},
		{"unknown engine", KindAuto, nil, "", nil, ErrUnrecognised},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := infoEngine(t, tc.routes)
			info, err := readInfo(t, srv.URL, tc.kind)
			if tc.err == nil && err != nil || tc.err != nil && !errors.Is(err, tc.err) {
				t.Errorf("error %v, want %v", err, tc.err)
			}
			if info.Version != tc.version || !maps.Equal(info.Flags, tc.flags) {
				t.Errorf("info %+v, want version %q flags %v", info, tc.version, tc.flags)
			}
		})
	}
}

// TestInfoTransportError: an engine that does not answer is an error.
func TestInfoTransportError(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	base := srv.URL
	srv.Close()
	sc := NewScraper(ScraperConfig{BaseURL: base, Kind: KindVLLM, Timeout: time.Second})
	info, err := sc.Info(context.Background())
	if err == nil || info.Version != "" || info.Flags != nil {
		t.Errorf("Info of a closed server = %+v, %v; want nothing and an error", info, err)
	}
}

// TestInfoSecrets: no credential the engine reports reaches Info, whatever its name's
// casing, and settings that merely mention tokens or key files stay.
func TestInfoSecrets(t *testing.T) {
	secrets := []string{"sk-live-123", "adm-456", "pem-pass-789", "hf_abc", "s3-secret-000", "tok-xyz", "pw-url"}
	doc := map[string]any{
		"api_key": secrets[0], "admin_api_key": secrets[1], "ssl_keyfile_password": secrets[2], "HF_TOKEN": secrets[3],
		"hicache_storage_backend_extra_config": `{"secret_access_key":"` + secrets[4] + `"}`,
		"kv-transfer.Secret":                   secrets[5],
		"dist_init_addr":                       "tcp://user:" + secrets[6] + "@10.0.0.1:5000",
		"lora_paths":                           []any{map[string]any{"token": secrets[5]}},
		// not credentials
		"max_total_tokens": 1000, "ssl_keyfile": "/etc/tls/key.pem", "speculative_token_map": "/maps/t.json",
		"ds_heavy_token_num": 256, "otlp_traces_endpoint": "http://collector:4317",
	}
	body, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	_, flags, err := parseServerInfo(body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range flags {
		for _, s := range secrets {
			if strings.Contains(k, s) || strings.Contains(v, s) {
				t.Errorf("flag %s = %q carries a credential", k, v)
			}
		}
	}
	want := map[string]string{
		"max_total_tokens": "1000", "ssl_keyfile": "/etc/tls/key.pem", "speculative_token_map": "/maps/t.json",
		"ds_heavy_token_num": "256", "otlp_traces_endpoint": "http://collector:4317",
	}
	if !maps.Equal(flags, want) {
		t.Errorf("flags %v, want %v", flags, want)
	}
}

func TestSecretName(t *testing.T) {
	for name, want := range map[string]bool{
		"api_key": true, "admin_api_key": true, "ssl_keyfile_password": true, "hf_token": true, "Auth-Token": true,
		"openai.apikey": true, "client_secret": true, "aws_credentials_file": true, "db_passwd": true, "keys": true,
		"max_total_tokens": false, "ssl_keyfile": false, "speculative_token_map": false, "ds_heavy_token_num": false,
		"tokenizer_path": false, "key_value_cache": false, "kv_cache_dtype": false, "": false, "___": false,
	} {
		if got := secretName(name); got != want {
			t.Errorf("secretName(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestInfoBounds: names, values and the number of settings are bounded.
func TestInfoBounds(t *testing.T) {
	doc := map[string]any{
		strings.Repeat("n", maxFlagName+1): 1,
		"long_value":                       strings.Repeat("v", maxFlagValue+1),
		"long_list":                        slices.Repeat([]any{12345}, maxFlagValue/5),
		"nested_list":                      []any{[]any{1}},
		"fits":                             strings.Repeat("v", maxFlagValue),
	}
	for i := range maxFlags + 10 {
		doc[fmt.Sprintf("f%04d", i)] = i
	}
	body, _ := json.Marshal(doc)
	_, flags, err := parseServerInfo(body)
	if err != nil {
		t.Fatal(err)
	}
	if len(flags) != maxFlags {
		t.Errorf("%d flags, want %d", len(flags), maxFlags)
	}
	// The first by name are kept: "f0000".."f0511" sort before "fits".
	for _, k := range []string{"long_value", "long_list", "nested_list", strings.Repeat("n", maxFlagName+1), "fits"} {
		if _, ok := flags[k]; ok {
			t.Errorf("flag %.20s kept", k)
		}
	}
	if _, ok := flags["f0511"]; !ok {
		t.Error("f0511 dropped; want the first maxFlags by name")
	}
}
