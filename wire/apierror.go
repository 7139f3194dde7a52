package wire

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
)

// Error types slogate writes. They are the types of the OpenAI API; clients
// (the OpenAI SDKs) choose an exception by HTTP status, so the type is for
// people and logs.
const (
	TypeInvalidRequest = "invalid_request_error" // 4xx other than 429: the request cannot be served as sent
	TypeRateLimit      = "rate_limit_error"      // 429: rejected by admission; retry after Retry-After
	TypeServer         = "server_error"          // 5xx: the engine is down, not ready or failed
)

// Error types the engines write, for matching decoded errors. vLLM and SGLang
// name the type after the Python exception; vLLM also puts the HTTP status in
// "code".
const (
	TypeEngineBadRequest     = "BadRequestError"
	TypeEngineNotFound       = "NotFoundError"
	TypeEngineInternalServer = "InternalServerError"
)

// APIError is the OpenAI error object. Param names the offending request
// field (null when none). Code is whatever the server put there: vLLM puts the
// HTTP status (an int), OpenAI a string such as "rate_limit_exceeded", others
// null.
type APIError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    any     `json:"code"`
}

// ErrorBody is the OpenAI error response body, {"error":{...}}.
type ErrorBody struct {
	Error APIError `json:"error"`
}

// TypeForStatus returns the error type slogate uses for an HTTP status:
// TypeRateLimit for 429, TypeInvalidRequest for other 4xx, TypeServer
// otherwise.
func TypeForStatus(status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return TypeRateLimit
	case status >= 400 && status < 500:
		return TypeInvalidRequest
	}
	return TypeServer
}

// WriteError writes e as an OpenAI error response with the given status. A nil
// Code becomes the status (as vLLM writes it) and an empty Type becomes
// TypeForStatus(status). It sets Content-Type (application/json),
// Content-Length and X-Content-Type-Options, leaving other headers (such as
// Retry-After) to the caller, who sets them before calling. WriteError is safe
// for concurrent use on different ResponseWriters.
func WriteError(w http.ResponseWriter, status int, e APIError) {
	if e.Code == nil {
		e.Code = status
	}
	if e.Type == "" {
		e.Type = TypeForStatus(status)
	}
	body, err := json.Marshal(ErrorBody{Error: e})
	if err != nil { // Code held a value JSON cannot encode
		e.Code = status
		body, _ = json.Marshal(ErrorBody{Error: e})
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(body) // the client may be gone; nothing to do about it here
}

// errorEnvelope accepts every error shape DecodeError knows.
type errorEnvelope struct {
	Error   json.RawMessage `json:"error"`
	Object  string          `json:"object"`
	Message *string         `json:"message"`
	Type    string          `json:"type"`
	Param   *string         `json:"param"`
	Code    any             `json:"code"`
	Detail  any             `json:"detail"`
}

// DecodeError decodes an error response body. It accepts the OpenAI form
// {"error":{"message",...}} (vLLM), the flat form {"object":"error",
// "message",...} (SGLang, older vLLM), {"error":"text"} and FastAPI's
// {"detail":"text"}. A numeric Code that is an integer is returned as an int.
// It fails with ErrMalformed for invalid JSON and ErrUnexpectedShape for other
// JSON. DecodeError is safe for concurrent use.
func DecodeError(data []byte) (APIError, error) {
	var env errorEnvelope
	if err := decodeObject(data, &env, "error body"); err != nil {
		return APIError{}, err
	}
	var e APIError
	switch {
	case len(env.Error) > 0 && env.Error[0] == '{':
		if err := json.Unmarshal(env.Error, &e); err != nil {
			return APIError{}, fmt.Errorf("wire: error body: %w: %v", ErrUnexpectedShape, err)
		}
	case len(env.Error) > 0 && env.Error[0] == '"':
		if err := json.Unmarshal(env.Error, &e.Message); err != nil {
			return APIError{}, fmt.Errorf("wire: error body: %w: %v", ErrUnexpectedShape, err)
		}
	case env.Message != nil:
		e = APIError{Message: *env.Message, Type: env.Type, Param: env.Param, Code: env.Code}
	default:
		detail, ok := env.Detail.(string)
		if !ok {
			return APIError{}, fmt.Errorf("wire: error body: %w: no error object", ErrUnexpectedShape)
		}
		e.Message = detail
	}
	e.Code = normalizeCode(e.Code)
	return e, nil
}

// normalizeCode turns an integral float64 (how encoding/json decodes numbers)
// back into an int, so that a decoded HTTP status compares equal to one.
func normalizeCode(code any) any {
	f, ok := code.(float64)
	if ok && f == math.Trunc(f) && math.Abs(f) <= 1<<53 {
		return int(f)
	}
	return code
}

// The messages with which the engines refuse a request at their own admission caps,
// verbatim (wire/testdata/errors): vLLM's QueueOverflowError (--max-num-queued-reqs) and
// MaxQueuedTokensError (--max-num-queued-tokens), vllm/exceptions.py; SGLang's
// --max-queued-requests, Scheduler._abort_on_queued_limit in
// python/sglang/srt/managers/scheduler.py.
var refusalMessages = map[string]bool{
	"The engine is currently busy and cannot accept new requests. Please try again later or on a different instance.": true,
	"The engine has reached its prefill token backlog limit. Please try again later or on a different instance.":      true,
	"The request queue is full.": true,
}

// Refusal reports whether e is an engine's refusal at its own admission caps: load the
// engine shed before doing any work, which a client may retry, not a failure of the
// engine. It knows the engines' messages exactly; a message it does not know is not a
// refusal, so a wording it has not seen counts as the engine's failure, never the
// reverse.
func (e APIError) Refusal() bool { return refusalMessages[e.Message] }

// IsRefusal reports whether data, an error body or the data of an error event, is an
// engine's refusal at its own admission caps (APIError.Refusal): an error object, or
// the abort that ends SGLang's native /generate stream (meta_info.finish_reason of type
// abort carrying the message; python/sglang/srt/managers/scheduler.py aborts with it).
func IsRefusal(data []byte) bool {
	if e, err := DecodeError(data); err == nil {
		return e.Refusal()
	}
	var g struct {
		MetaInfo struct {
			FinishReason struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"finish_reason"`
		} `json:"meta_info"`
	}
	if json.Unmarshal(data, &g) != nil {
		return false
	}
	f := g.MetaInfo.FinishReason
	return f.Type == "abort" && refusalMessages[f.Message]
}
