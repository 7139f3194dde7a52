package wire

import (
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"testing"
)

func TestWriteError(t *testing.T) {
	tests := []struct {
		name   string
		status int
		err    APIError
		want   string
	}{
		{"rate limit with defaults", http.StatusTooManyRequests, APIError{Message: "queue full for tier long"},
			`{"error":{"message":"queue full for tier long","type":"rate_limit_error","param":null,"code":429}}`},
		{"bad field", http.StatusBadRequest,
			APIError{Message: `wire: field "max_tokens": must be a non-negative integer`, Param: ptr("max_tokens")},
			`{"error":{"message":"wire: field \"max_tokens\": must be a non-negative integer","type":"invalid_request_error","param":"max_tokens","code":400}}`},
		{"engine down", http.StatusServiceUnavailable, APIError{Message: "engine not ready"},
			`{"error":{"message":"engine not ready","type":"server_error","param":null,"code":503}}`},
		{"explicit type and string code", http.StatusTooManyRequests,
			APIError{Message: "slow down", Type: "requests", Code: "rate_limit_exceeded"},
			`{"error":{"message":"slow down","type":"requests","param":null,"code":"rate_limit_exceeded"}}`},
		{"unencodable code falls back to the status", http.StatusInternalServerError,
			APIError{Message: "x", Code: math.Inf(1)},
			`{"error":{"message":"x","type":"server_error","param":null,"code":500}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			rec.Header().Set("Retry-After", "2")
			WriteError(rec, tt.status, tt.err)
			res := rec.Result()
			if res.StatusCode != tt.status {
				t.Errorf("status = %d, want %d", res.StatusCode, tt.status)
			}
			if got := rec.Body.String(); got != tt.want {
				t.Errorf("body\n got  %s\n want %s", got, tt.want)
			}
			h := res.Header
			if h.Get("Content-Type") != "application/json" || h.Get("Retry-After") != "2" ||
				h.Get("Content-Length") != strconv.Itoa(len(tt.want)) {
				t.Errorf("headers = %v", h)
			}
			back, err := DecodeError(rec.Body.Bytes())
			if err != nil || back.Message != tt.err.Message {
				t.Errorf("DecodeError of the written body = %+v, %v", back, err)
			}
		})
	}
}

func TestTypeForStatus(t *testing.T) {
	tests := []struct {
		status int
		want   string
	}{
		{400, TypeInvalidRequest}, {404, TypeInvalidRequest}, {413, TypeInvalidRequest},
		{429, TypeRateLimit}, {500, TypeServer}, {503, TypeServer}, {504, TypeServer}, {200, TypeServer},
	}
	for _, tt := range tests {
		if got := TypeForStatus(tt.status); got != tt.want {
			t.Errorf("TypeForStatus(%d) = %q, want %q", tt.status, got, tt.want)
		}
	}
}

func TestDecodeError(t *testing.T) {
	tests := []struct {
		name string
		data string
		want APIError
	}{
		{"vLLM", `{"error":{"message":"This model's maximum context length is 4096 tokens.","type":"BadRequestError","param":"prompt","code":400}}`,
			APIError{Message: "This model's maximum context length is 4096 tokens.", Type: TypeEngineBadRequest, Param: ptr("prompt"), Code: 400}},
		{"OpenAI", `{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
			APIError{Message: "Rate limit reached", Type: "requests", Code: "rate_limit_exceeded"}},
		{"flat (SGLang, older vLLM)", `{"object":"error","message":"The model does not exist.","type":"NotFoundError","param":null,"code":404}`,
			APIError{Message: "The model does not exist.", Type: TypeEngineNotFound, Code: 404}},
		{"error string", `{"error":"upstream timeout"}`, APIError{Message: "upstream timeout"}},
		{"FastAPI detail", `{"detail":"Not Found"}`, APIError{Message: "Not Found"}},
		{"missing fields", `{"error":{"message":"x"}}`, APIError{Message: "x"}},
		{"non-integral code kept", `{"error":{"message":"x","code":1.5}}`, APIError{Message: "x", Code: 1.5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeError([]byte(tt.data))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("DecodeError =\n  %#v\nwant\n  %#v", got, tt.want)
			}
		})
	}
}

func TestDecodeErrorFailures(t *testing.T) {
	tests := []struct {
		name string
		data string
		want error
	}{
		{"not JSON", `Internal Server Error`, ErrMalformed},
		{"truncated", `{"error":{`, ErrMalformed},
		{"array", `[{"error":"x"}]`, ErrUnexpectedShape},
		{"no error", `{"id":"cmpl-1","choices":[]}`, ErrUnexpectedShape},
		{"error is a number", `{"error":5}`, ErrUnexpectedShape},
		{"error message is a number", `{"error":{"message":5}}`, ErrUnexpectedShape},
		{"detail is a list", `{"detail":[{"loc":["body"],"msg":"field required"}]}`, ErrUnexpectedShape},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := DecodeError([]byte(tt.data)); !errors.Is(err, tt.want) {
				t.Errorf("DecodeError error = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestIsRefusal(t *testing.T) {
	tests := []struct {
		name string
		data string
		want bool
	}{
		{"vLLM request cap", `{"error":{"message":"The engine is currently busy and cannot accept new requests. Please try again later or on a different instance.","type":"Service Unavailable","param":null,"code":503}}`, true},
		{"vLLM token cap", `{"error":{"message":"The engine has reached its prefill token backlog limit. Please try again later or on a different instance.","type":"Service Unavailable","param":null,"code":503}}`, true},
		{"SGLang flat", `{"object":"error","message":"The request queue is full.","type":"503","param":null,"code":503}`, true},
		{"SGLang FastAPI detail", `{"detail":"The request queue is full."}`, true},
		{"SGLang stream event", `{"error":{"object":"error","message":"The request queue is full.","type":"SERVICE_UNAVAILABLE","param":null,"code":503}}`, true},
		{"SGLang /generate abort", `{"text":"","output_ids":[],"meta_info":{"id":"x","finish_reason":{"type":"abort","status_code":503,"message":"The request queue is full."},"completion_tokens":0}}`, true},
		// Anything else is the engine's failure, however near the wording.
		{"other 503", `{"error":{"message":"The engine is not ready.","type":"Service Unavailable","code":503}}`, false},
		{"wording changed", `{"error":{"message":"The engine is currently busy.","type":"Service Unavailable","code":503}}`, false},
		{"abort for another reason", `{"text":"","meta_info":{"finish_reason":{"type":"abort","message":"Abort before prefill"}}}`, false},
		{"the message as a stop, not an abort", `{"text":"","meta_info":{"finish_reason":{"type":"stop","message":"The request queue is full."}}}`, false},
		{"an answer", `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"The request queue is full."}}]}`, false},
		{"not JSON", `The request queue is full.`, false},
		{"empty", ``, false},
	}
	for _, tt := range tests {
		if got := IsRefusal([]byte(tt.data)); got != tt.want {
			t.Errorf("%s: IsRefusal = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// FuzzIsRefusal checks that IsRefusal never panics, and that an error object decides
// by its own message alone: one whose message is not a refusal is never taken for one,
// whatever else the data carries.
func FuzzIsRefusal(f *testing.F) {
	f.Add([]byte(`{"detail":"The request queue is full."}`))
	f.Add([]byte(`{"error":{"message":"The request queue is full.","code":503}}`))
	f.Add([]byte(`{"meta_info":{"finish_reason":{"type":"abort","message":"The request queue is full."}}}`))
	f.Add([]byte(`{"error":"x","meta_info":{"finish_reason":{"type":"abort","message":"The request queue is full."}}}`))
	f.Add([]byte(`{"meta_info":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got := IsRefusal(data)
		if e, err := DecodeError(data); err == nil && got != e.Refusal() {
			t.Fatalf("%q: IsRefusal %v, but its error object's message %q says %v", data, got, e.Message, e.Refusal())
		}
	})
}
