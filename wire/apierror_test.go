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
