package engine

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"
)

// FuzzInfo reads an engine's answers about itself through Scraper.Info, the path they
// take into slogate's reports: the info metric's labels in /metrics, vLLM's /version and
// SGLang's server info, each endpoint answering or missing. Whatever the bodies, Info
// keeps at most maxFlags settings, each name and value within its bound, none named as a
// credential and none a URL with user information, and a version of at most maxVersion
// bytes; on SGLang without /metrics, Info is exactly what its server info parses to.
func FuzzInfo(f *testing.F) {
	f.Add(infoFixture(f, "vllm-cache_config_info.prom"), infoFixture(f, "vllm-version.json"), uint8(1), uint8(0))
	f.Add(fixture(f, "sglang_cache_config.prom"), infoFixture(f, "sglang-server_info.json"), uint8(2), uint8(0))
	f.Add([]byte("vllm:num_requests_running 1\n"), []byte(`{"version":"0.8.5"}`), uint8(0), uint8(1))
	f.Add([]byte(""), []byte(`{"api_key":"sk-1","admin_api_key":"a","x":[1,"b",true,null],"y":{"z":1},"u":"http://a:b@h/"}`), uint8(2), uint8(2))
	f.Add([]byte("sglang:cache_config_info{page_size=\"1\",num_pages=\"9\",dp_rank=\"1\"} 1\n"), []byte(`{"version":7}`), uint8(2), uint8(3))
	f.Add([]byte("not an exposition {"), []byte(`[]`), uint8(1), uint8(0))

	f.Fuzz(func(t *testing.T, metrics, about []byte, kind, missing uint8) {
		k := []Kind{KindAuto, KindVLLM, KindSGLang}[int(kind)%3]
		eng := &infoFuzzEngine{metrics: metrics, about: about, missing: missing}
		sc := NewScraper(ScraperConfig{BaseURL: "http://engine", Kind: k, Client: &http.Client{Transport: eng}})
		info, err := sc.Info(context.Background())
		checkInfo(t, info)
		v, flags, perr := parseServerInfo(about)
		if perr == nil {
			checkInfo(t, Info{Version: v, Flags: flags})
		}
		if k == KindSGLang && missing == 1 && perr == nil && err != nil {
			// No /metrics (missing, so no error) and a server info that parses.
			t.Fatalf("a valid server info: error %v", err)
		}
		if k == KindSGLang && missing == 1 && (info.Version != v || len(info.Flags) != len(flags)) {
			t.Fatalf("Info %+v differs from the server info it read (%q, %d flags)", info, v, len(flags))
		}
		if v, err := parseVersion(about); err == nil && len(v) > maxVersion {
			t.Fatalf("version of %d bytes", len(v))
		}
	})
}

// checkInfo checks the bounds and the redaction Info guarantees.
func checkInfo(t *testing.T, info Info) {
	t.Helper()
	if len(info.Version) > maxVersion {
		t.Fatalf("version of %d bytes", len(info.Version))
	}
	if info.Flags != nil && len(info.Flags) == 0 {
		t.Fatal("an empty, non-nil flag map")
	}
	if len(info.Flags) > maxFlags {
		t.Fatalf("%d flags, more than %d", len(info.Flags), maxFlags)
	}
	for k, v := range info.Flags {
		switch {
		case k == "" || len(k) > maxFlagName || len(v) > maxFlagValue:
			t.Fatalf("flag %.40q = %.40q out of bounds", k, v)
		case secretName(k):
			t.Fatalf("flag %q is named as a credential", k)
		case secretValue(v):
			t.Fatalf("flag %q = %q is a URL with user information", k, v)
		case identityLabels[k]:
			t.Fatalf("flag %q is an identity label", k)
		}
	}
}

// infoFuzzEngine answers /metrics with metrics and both engines' info endpoints with
// about; bit 0 of missing makes /metrics 404, bit 1 the info endpoints.
type infoFuzzEngine struct {
	metrics, about []byte
	missing        uint8
}

func (e *infoFuzzEngine) RoundTrip(r *http.Request) (*http.Response, error) {
	resp := &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Header: http.Header{}, Request: r}
	var body []byte
	switch path := r.URL.Path; {
	case path == "/metrics" && e.missing&1 == 0:
		resp.Header.Set("Content-Type", "text/plain; version=0.0.4")
		body = e.metrics
	case (path == "/version" || path == "/server_info" || path == "/get_server_info") && e.missing&2 == 0:
		resp.Header.Set("Content-Type", "application/json")
		body = e.about
	default:
		resp.StatusCode, resp.Status = http.StatusNotFound, "404 Not Found"
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}
