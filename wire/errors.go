package wire

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error returned by this package wraps one of them (or is
// an error returned by a caller-supplied callback or io.Reader); use errors.Is.
var (
	// ErrMalformed reports input that is not valid JSON (RFC 8259), including
	// strings that are not valid UTF-8.
	ErrMalformed = errors.New("malformed JSON")
	// ErrTooDeep reports JSON nested more than MaxDepth arrays and objects deep.
	ErrTooDeep = errors.New("JSON nested too deeply")
	// ErrInvalidField reports valid JSON whose fields do not have the types
	// or values the OpenAI API requires. The error is a *FieldError.
	ErrInvalidField = errors.New("invalid field")
	// ErrEventTooLarge reports a Server-Sent Event larger than the parser's
	// limit.
	ErrEventTooLarge = errors.New("SSE event too large")
	// ErrUnexpectedShape reports valid JSON that does not have the shape of a
	// chunk, a response or an error body.
	ErrUnexpectedShape = errors.New("unexpected JSON shape")
)

// SyntaxError describes malformed JSON found by Inspect. It wraps ErrMalformed
// or ErrTooDeep (Err). Its message is safe to return to a client: it holds at
// most the one offending character of the input.
type SyntaxError struct {
	Offset int    // byte offset of the fault in the input
	Msg    string // what was wrong, e.g. "invalid escape in string"
	Err    error  // ErrMalformed or ErrTooDeep
}

// Error returns e.g. "wire: malformed JSON at offset 17: invalid escape in string".
func (e *SyntaxError) Error() string {
	return fmt.Sprintf("wire: %v at offset %d: %s", e.Err, e.Offset, e.Msg)
}

// Unwrap returns ErrMalformed or ErrTooDeep.
func (e *SyntaxError) Unwrap() error { return e.Err }

// FieldError describes a request field that is valid JSON but not a valid value
// for the OpenAI API. It wraps ErrInvalidField. Field is a path such as
// "max_tokens" or "messages[2].content[0].text" (empty for the body itself);
// a proxy can use it as the "param" of an OpenAI error. Its message is safe to
// return to a client: it names the field but holds no part of the value.
type FieldError struct {
	Field  string // JSON path of the field; "" for the request body itself
	Offset int    // byte offset of the value in the input (of the body for missing fields)
	Msg    string // what is required, e.g. "must be a non-negative integer"
}

// Error returns e.g. `wire: field "max_tokens": must be a non-negative integer`.
func (e *FieldError) Error() string {
	if e.Field == "" {
		return "wire: request body: " + e.Msg
	}
	return fmt.Sprintf("wire: field %q: %s", e.Field, e.Msg)
}

// Unwrap returns ErrInvalidField.
func (e *FieldError) Unwrap() error { return ErrInvalidField }
