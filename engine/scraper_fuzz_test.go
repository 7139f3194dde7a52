package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/slogate/slogate/clock"
)

// FuzzScrape scrapes an engine twice through the Scraper, the path engine data takes
// into slogate: the bounded body read, the exposition parser, the mapping onto a
// Snapshot with ratios over the interval between two different readings (FuzzRead sees
// one reading), and /v1/models. A scrape is up exactly when the body is within the limit
// and parses and reads as the configured engine; a body over the limit fails with
// ErrTooLarge (or ErrMalformed, for a malformed line within the limit); measurements are finite or NaN; a failed scrape keeps the measurements of
// the last good one; the served models are the ids /v1/models lists.
func FuzzScrape(f *testing.F) {
	for _, name := range []string{"vllm_v1_dp.prom", "sglang_all_schedulers.prom", "vllm_v08_old_names.prom"} {
		ps := pieces(fixture(f, name), 512)
		f.Add(ps[0], ps[len(ps)-1], []byte(`{"object":"list","data":[{"id":"m"}]}`), uint8(0), uint16(0))
	}
	f.Add([]byte("vllm:prefix_cache_hits_total 10\nvllm:prefix_cache_queries_total 20\n"),
		[]byte("vllm:prefix_cache_hits_total 5\nvllm:prefix_cache_queries_total 1e308\n"), []byte(`{"data":[{"id":"a"},{"id":""}]}`), uint8(1), uint16(0))
	f.Add([]byte("sglang:spec_accept_length 2\nsglang:num_running_reqs 1\n"), []byte("sglang:num_running_reqs 1e309\n"), []byte(`{"data":null}`), uint8(2), uint16(0))
	f.Add([]byte("vllm:num_requests_running 1\n"), []byte("vllm:num_requests_running 2\n"), []byte(`not json`), uint8(0), uint16(20))
	f.Add([]byte(""), []byte("# only a comment\n"), []byte(`{"data":[{"id":7}]}`), uint8(0), uint16(1))

	f.Fuzz(func(t *testing.T, first, second, models []byte, kind uint8, limit uint16) {
		k := []Kind{KindAuto, KindVLLM, KindSGLang}[int(kind)%3]
		eng := &fuzzEngine{bodies: [][]byte{first, second}, models: models}
		sc := NewScraper(ScraperConfig{BaseURL: "http://engine", Kind: k, Client: &http.Client{Transport: eng}, Clock: clock.NewFake(time.Unix(1700000000, 0))})
		if limit > 0 {
			sc.maxBody = int64(limit)
		}
		var prev *Snapshot
		for _, body := range eng.bodies {
			s := sc.Scrape(context.Background())
			checkScrape(t, body, k, sc.maxBody, s, prev)
			if s.Up {
				checkModels(t, models, s.Models)
				prev = &s
			}
		}
	})
}

// checkScrape checks the snapshot s of one scrape of body against the direct path of
// FuzzRead; prev is the last snapshot that was up, if any.
func checkScrape(t *testing.T, body []byte, k Kind, limit int64, s Snapshot, prev *Snapshot) {
	t.Helper()
	for name, v := range fields(s) {
		if math.IsInf(v, 0) {
			t.Fatalf("%s = %v, want finite or NaN", name, v)
		}
	}
	if int64(len(body)) > limit {
		// The parser may stop at a malformed line within the limit before it reads past it.
		if s.Up || !errors.Is(s.Err, ErrTooLarge) && !errors.Is(s.Err, ErrMalformed) {
			t.Fatalf("a %d-byte body over the limit of %d: up %v, err %v", len(body), limit, s.Up, s.Err)
		}
	} else if want := readsAs(body, k); s.Up != want {
		t.Fatalf("scrape up %v (err %v), but the body reads as %v: %v", s.Up, s.Err, k, want)
	}
	if s.Up {
		if s.Err != nil || k != KindAuto && s.Kind != k {
			t.Fatalf("up with err %v, kind %v (configured %v)", s.Err, s.Kind, k)
		}
		return
	}
	if s.Err == nil {
		t.Fatal("down without an error")
	}
	if prev != nil {
		if d := measurementDiff(s, *prev); len(d) > 0 {
			t.Fatalf("a failed scrape changed the last good measurements: %v", d)
		}
	}
}

// readsAs reports whether body parses and reads as an engine of kind k.
func readsAs(body []byte, k Kind) bool {
	fams, err := parseExposition(bytes.NewReader(body))
	if err != nil {
		return false
	}
	_, err = read(fams, k)
	return err == nil
}

// checkModels checks the served models of a snapshot that is up against what
// encoding/json makes of the /v1/models body.
func checkModels(t *testing.T, body []byte, got []string) {
	t.Helper()
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if json.NewDecoder(bytes.NewReader(body)).Decode(&list) != nil {
		if got != nil {
			t.Fatalf("models %q from a /v1/models body that does not decode", got)
		}
		return
	}
	want := []string{}
	for _, m := range list.Data {
		want = append(want, m.ID)
	}
	if !slices.Equal(got, want) || got == nil {
		t.Fatalf("models %q, /v1/models lists %q", got, want)
	}
}

// fuzzEngine answers /metrics with its bodies in turn and /v1/models with models.
type fuzzEngine struct {
	bodies [][]byte
	next   int
	models []byte
}

func (e *fuzzEngine) RoundTrip(r *http.Request) (*http.Response, error) {
	resp := &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Header: http.Header{}, Request: r}
	switch r.URL.Path {
	case "/metrics":
		resp.Header.Set("Content-Type", "text/plain; version=0.0.4")
		resp.Body = io.NopCloser(bytes.NewReader(e.bodies[e.next%len(e.bodies)]))
		e.next++
	case "/v1/models":
		resp.Header.Set("Content-Type", "application/json")
		resp.Body = io.NopCloser(bytes.NewReader(e.models))
	default:
		resp.StatusCode, resp.Status, resp.Body = http.StatusNotFound, "404 Not Found", http.NoBody
	}
	return resp, nil
}

// FuzzParseKind: ParseKind accepts exactly the names String gives (and "" for auto), and
// a refused name gets a message quoting it.
func FuzzParseKind(f *testing.F) {
	for _, s := range []string{"", "auto", "vllm", "sglang", "VLLM", " vllm", "unknown", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseKind(s)
		if err != nil {
			if k != KindAuto || !bytes.Contains([]byte(err.Error()), []byte(`"`)) {
				t.Fatalf("ParseKind(%q) = %v, %v", s, k, err)
			}
			return
		}
		if s != "" && k.String() != s {
			t.Fatalf("ParseKind(%q) = %v, whose name is %q", s, k, k.String())
		}
		if again, err := ParseKind(k.String()); err != nil || again != k {
			t.Fatalf("ParseKind(%q) = %v, %v", k.String(), again, err)
		}
	})
}
