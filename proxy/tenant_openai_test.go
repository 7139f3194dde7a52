package proxy_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/wire"
)

// TestTenantOpenAIClient checks tenants as the OpenAI SDK for Go sees them, against
// slogate in front of the simulator: a client that names its tenant per request with a
// header reads the x-ratelimit-* headers of its answers, streamed or not, from the raw
// response; once the tenant's budget is spent, its request fails with an *openai.Error of
// status 429 whose code is the reason and whose Response carries the same headers and
// when to retry. The SDK does not retry (WithMaxRetries(0)), and the request turned away
// never reaches the engine.
func TestTenantOpenAIClient(t *testing.T) {
	e := startTenantEnv(t, admission.Enforce, tenantsFile)
	c := openai.NewClient(option.WithBaseURL(e.f.hs.URL+"/v1"), option.WithAPIKey("sk-test"),
		option.WithMaxRetries(0), option.WithHTTPClient(e.f.hs.Client()))
	params := openai.ChatCompletionNewParams{
		Model:     simModel,
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage(shortQuestion)},
		MaxTokens: openai.Int(8),
	}
	as := func(name string) option.RequestOption { return option.WithHeader("X-Tenant", name) }
	ctx := context.Background()

	// Answers: the tenant "req" may send 3 requests a minute, "free" as many as it likes.
	answers := []struct {
		what, tenant string
		stream       bool
		requests     string // the x-ratelimit-*-requests headers, as checkQuota takes them
	}{
		{"first answer", "req", false, "3 2 20s"},
		{"second answer, streamed", "req", true, "3 1 40s"},
		{"another tenant's answer", "free", false, ""},
		{"third answer, streamed", "req", true, "3 0 1m0s"},
	}
	for _, a := range answers {
		var resp *http.Response
		if a.stream {
			s := c.Chat.Completions.NewStreaming(ctx, params, as(a.tenant), option.WithResponseInto(&resp))
			chunks := 0
			for s.Next() {
				chunks++
			}
			if err := s.Err(); err != nil || chunks == 0 {
				t.Fatalf("%s: %d chunks, error %v", a.what, chunks, err)
			}
			s.Close()
		} else {
			cc, err := c.Chat.Completions.New(ctx, params, as(a.tenant), option.WithResponseInto(&resp))
			if err != nil {
				t.Fatalf("%s: %v", a.what, err)
			}
			if len(cc.Choices) != 1 || cc.Choices[0].Message.Content == "" {
				t.Fatalf("%s: %+v, want one choice with content", a.what, cc.Choices)
			}
		}
		checkQuota(t, a.what, resp.Header, "requests", a.requests)
		checkQuota(t, a.what, resp.Header, "tokens", "")
	}

	// Turned away, streamed or not: the same error.
	for _, stream := range []bool{false, true} {
		what := "fourth request"
		var err error
		if stream {
			what += ", streamed"
			s := c.Chat.Completions.NewStreaming(ctx, params, as("req"))
			if s.Next() {
				t.Fatalf("%s: a chunk from a request over its budget", what)
			}
			err = s.Err()
			s.Close()
		} else {
			_, err = c.Chat.Completions.New(ctx, params, as("req"))
		}
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) {
			t.Fatalf("%s: error %v (%T), want an *openai.Error", what, err, err)
		}
		reason := admission.TenantRequests.String()
		if apiErr.StatusCode != http.StatusTooManyRequests || apiErr.Code != reason || apiErr.Type != wire.TypeRateLimit {
			t.Errorf("%s: %d %q of type %q, want 429 %q of type %q", what, apiErr.StatusCode, apiErr.Code, apiErr.Type, reason, wire.TypeRateLimit)
		}
		h := apiErr.Response.Header
		checkQuota(t, what, h, "requests", "3 0 1m0s")
		if h.Get("Retry-After-Ms") != "20000" || h.Get("Retry-After") != "20" || h.Get("X-Slogate-Reason") != reason {
			t.Errorf("%s: Retry-After-Ms %q, Retry-After %q, X-Slogate-Reason %q; want 20000, 20, %s",
				what, h.Get("Retry-After-Ms"), h.Get("Retry-After"), h.Get("X-Slogate-Reason"), reason)
		}
	}

	results := e.f.obs.wait(t, len(answers)+2)
	if res := results[len(results)-1].res; res.Tenant != "req" {
		t.Errorf("the last request's Result: tenant %q, want req", res.Tenant)
	}
	e.sim.mu.Lock()
	defer e.sim.mu.Unlock()
	if e.sim.requests != len(answers) {
		t.Errorf("the simulator got %d requests, want the %d answered (no retry, nothing turned away)", e.sim.requests, len(answers))
	}
}
