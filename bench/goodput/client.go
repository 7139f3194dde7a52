package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/slogate/slogate/wire"
)

// tenantHeader is the request header that names a request's tenant (class.Tenant); the
// fairness phase's tenants section identifies by it.
const tenantHeader = "X-Tenant"

// newClient returns an HTTP client for one stack: as many connections as requests in
// flight, no compression, no timeouts (the run's cut-off ends what is left).
func newClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		MaxIdleConns: 4096, MaxIdleConnsPerHost: 4096, IdleConnTimeout: time.Minute, DisableCompression: true,
	}}
}

// send posts one streaming completion and reads it to its end, measuring as the client
// sees it: the response's headers (which slogate sends once the request left its queue:
// the engine streams its headers at once), TTFT from just before sending to the first
// chunk carrying output, E2E to the stream's end marker, tokens from the usage report and
// the chunks carrying output as they come. A non-empty tenant goes in the tenant header.
// When ctx ends (the run's cut-off) the request is abandoned and marked Cut.
func send(ctx context.Context, client *http.Client, url string, body []byte, tenant string, o *outcome) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		o.Err = true
		return
	}
	req.Header.Set("Content-Type", "application/json")
	if tenant != "" {
		req.Header.Set(tenantHeader, tenant)
	}
	start := time.Now()
	defer func() {
		if !o.Done {
			o.E2E = time.Since(start)
			o.Cut = ctx.Err() != nil
		}
	}()
	resp, err := client.Do(req)
	if err != nil {
		o.Err = ctx.Err() == nil
		return
	}
	defer resp.Body.Close()
	o.Status, o.Headers = resp.StatusCode, time.Since(start)
	if resp.StatusCode != http.StatusOK {
		o.Reason = resp.Header.Get("X-Slogate-Reason")
		if o.Reason == "" { // not slogate's refusal: the engine's own (its admission caps)
			o.Reason = fmt.Sprintf("engine %d", resp.StatusCode)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		return
	}
	r := wire.NewSSEReader(resp.Body, 0)
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			o.Err = ctx.Err() == nil
			return
		}
		if ev.Comment {
			continue
		}
		if ev.IsDone() {
			o.Done, o.E2E = true, time.Since(start)
			continue
		}
		c, err := wire.ScanChunk(ev.Data)
		if err != nil || c.IsError {
			o.Err = true
			continue
		}
		if c.OutputBytes > 0 {
			if !o.FirstTok {
				o.FirstTok, o.TTFT = true, time.Since(start)
			}
			o.Chunks++
		}
		if c.HasUsage {
			o.Tokens = c.Usage.CompletionTokens
		}
	}
}
