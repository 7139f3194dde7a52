package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/slogate/slogate/wire"
)

// errShort reports a stream that ended before all the tokens asked for came through.
var errShort = errors.New("stream ended early")

// stream sends one streaming completion and reads it to its end. It returns the TTFT,
// measured from just before the request is sent to the arrival of the first chunk that
// carries output, and the number of output chunks (one per token with the pacer).
func stream(ctx context.Context, client *http.Client, url, body string, want int) (time.Duration, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("status %s", resp.Status)
	}
	r := wire.NewSSEReader(resp.Body, 0)
	var ttft time.Duration
	n := 0
	for {
		ev, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return ttft, n, err
		}
		if !isOutput(ev, n == 0) {
			continue
		}
		if n == 0 {
			ttft = time.Since(start)
		}
		n++
	}
	if n < want || ttft == 0 {
		return ttft, n, fmt.Errorf("%w: %d of %d tokens", errShort, n, want)
	}
	return ttft, n, nil
}

// isOutput reports whether ev is a chunk that carries output. Until the first output
// the chunk is decoded, as any client would to see the first token; after it, an event
// counts when it is a chunk with choices (the pacer sends one token per chunk), which
// keeps the client's CPU per token low.
func isOutput(ev wire.Event, decode bool) bool {
	if ev.Comment || ev.IsDone() {
		return false
	}
	if decode {
		c, err := wire.DecodeChunk(ev.Data)
		return err == nil && c.OutputBytes() > 0
	}
	return bytes.HasPrefix(ev.Data, []byte("{")) && !bytes.Contains(ev.Data, []byte(`"choices":[]`))
}
