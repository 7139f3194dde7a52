package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/slogate/slogate/engine"
	"github.com/slogate/slogate/wire"
)

// TestStream checks that a paced stream is what vLLM sends: n token chunks whose bytes
// are wire's encoding of the same chunk, the last with finish reason "length", the usage
// chunk when asked, and [DONE].
func TestStream(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		n     int
		usage bool
	}{
		{name: "max_tokens", body: `{"prompt":"abcdefgh","max_tokens":5,"stream":true}`, n: 5},
		{name: "default tokens", body: `{"prompt":"abcdefgh","stream":true}`, n: 3},
		{name: "usage", body: `{"prompt":"abcdefgh","max_tokens":4,"stream":true,"stream_options":{"include_usage":true}}`, n: 4, usage: true},
	}
	srv := httptest.NewServer(newPacer("m", 0, time.Millisecond, 3).handler())
	defer srv.Close()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := http.Post(srv.URL+"/v1/completions", "application/json", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
				t.Fatalf("Content-Type %q", ct)
			}
			r := wire.NewSSEReader(resp.Body, 0)
			var tokens, usages int
			done := false
			for {
				ev, err := r.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if ev.IsDone() {
					done = true
					continue
				}
				c, err := wire.DecodeChunk(ev.Data)
				if err != nil {
					t.Fatalf("chunk %q: %v", ev.Data, err)
				}
				if want, _ := json.Marshal(c); string(want) != string(ev.Data) {
					t.Errorf("chunk bytes\n got %s\nwant %s", ev.Data, want)
				}
				if c.UsageOnly() {
					usages++
					if c.Usage.CompletionTokens != tt.n || c.Usage.PromptTokens != 2 {
						t.Errorf("usage %+v, want %d completion and 2 prompt tokens", *c.Usage, tt.n)
					}
					continue
				}
				tokens++
				reason, finished := c.Finished()
				if last := tokens == tt.n; finished != last || last && reason != "length" {
					t.Errorf("token %d: finish reason %q (%v)", tokens, reason, finished)
				}
			}
			if tokens != tt.n || !done || usages != map[bool]int{true: 1}[tt.usage] {
				t.Errorf("got %d tokens, %d usage chunks, done %v; want %d tokens, usage %v, done", tokens, usages, done, tt.n, tt.usage)
			}
		})
	}
}

// TestNonStreaming checks the one-body answer.
func TestNonStreaming(t *testing.T) {
	srv := httptest.NewServer(newPacer("m", 0, time.Millisecond, 3).handler())
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"x","max_tokens":2}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	c, err := wire.DecodeResponse(body)
	if err != nil {
		t.Fatal(err)
	}
	if c.OutputBytes() != 2*len(tokenText) || c.Usage == nil || c.Usage.CompletionTokens != 2 {
		t.Errorf("response %s", body)
	}
}

// TestScrape checks that slogate's engine scraper recognises the pacer as vLLM.
func TestScrape(t *testing.T) {
	srv := httptest.NewServer(newPacer("m", 0, time.Millisecond, 3).handler())
	defer srv.Close()
	snap := engine.NewScraper(engine.ScraperConfig{BaseURL: srv.URL}).Scrape(context.Background())
	if !snap.Up || snap.Kind != engine.KindVLLM || snap.Running != 0 || snap.KVCapacityTokens != kvCapacity ||
		len(snap.Models) != 1 || snap.Models[0] != "m" {
		t.Errorf("snapshot %+v", snap)
	}
}
