package demo

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"
)

// The demo's live traffic: synthetic clients streaming completions of varied sizes
// through the sidecar, some of which give up early.

// demoPreamble opens every synthetic prompt, as a system prompt does: after the first
// request the engine's prefix cache holds its blocks.
const demoPreamble = "You are the assistant of the slogate demo. Answer in plain words, keep every answer short, and say so when you do not know the answer. "

var demoWords = strings.Fields("the engine serves tokens while the proxy measures each one and exports the result")

// syntheticClient streams completions of varied sizes through slogate, as tenant, until
// ctx ends.
func syntheticClient(ctx context.Context, base, tenant string, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x5106a7e))
	for ctx.Err() == nil {
		body, giveUp := demoRequest(rng)
		demoSend(ctx, base, tenant, body, giveUp)
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(rng.IntN(500)) * time.Millisecond):
		}
	}
}

// demoRequest returns the body of one synthetic request, and whether its client gives
// up after the first chunk. Most prompts are short (the short tier); one in eight is a
// long document of 2,300 to 3,200 tokens (the medium tier); one client in sixteen gives
// up on a long answer, as impatient users do.
func demoRequest(rng *rand.Rand) (body string, giveUp bool) {
	n := 20 + rng.IntN(400)
	if rng.IntN(8) == 0 {
		n = 1500 + rng.IntN(500)
	}
	var prompt strings.Builder
	prompt.WriteString(demoPreamble)
	for range n {
		prompt.WriteString(demoWords[rng.IntN(len(demoWords))] + " ")
	}
	maxTokens := 16 + rng.IntN(240)
	if giveUp = rng.IntN(16) == 0; giveUp {
		maxTokens = 256
	}
	return fmt.Sprintf(`{"prompt":%q,"max_tokens":%d,"stream":true}`, prompt.String(), maxTokens), giveUp
}

// demoSend sends one request of tenant and reads its answer, or only the first chunk of
// it.
func demoSend(ctx context.Context, base, tenant, body string, giveUp bool) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/completions", strings.NewReader(body))
	if err != nil {
		return
	}
	req.Header.Set("X-Tenant", tenant)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	if giveUp {
		_, _ = resp.Body.Read(make([]byte, 512))
		return // cancel closes the connection
	}
	_, _ = io.Copy(io.Discard, resp.Body)
}
