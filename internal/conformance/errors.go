package conformance

import (
	"path/filepath"
)

// ErrorExpect is what one error answer of the corpus is and what slogate must make of
// it: the request it answers, the status, the outcome (measure.Outcome's String form)
// and the fields wire.DecodeError reads from the body (Code 0 when it has none).
type ErrorExpect struct {
	Route   string `json:"route"` // wire.Route's String form
	Stream  bool   `json:"stream"`
	Status  int    `json:"status"`
	Outcome string `json:"outcome"`
	Type    string `json:"type"`
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// ErrorAnswer is one error answer of the corpus, e.g. "vllm_queue_overflow.json".
type ErrorAnswer = Entry[ErrorExpect]

// ErrorsDir returns the directory of the error answers, wire/testdata/errors of this
// module.
func ErrorsDir() string { return filepath.Join(Dir(), "..", "errors") }

// Errors returns every error answer with its expectation, in file-name order. Like
// Streams, it fails when a file has no expectation or an expectation no file.
func Errors() ([]ErrorAnswer, error) { return load[ErrorExpect](ErrorsDir(), "*.json") }
