// Package conformance loads the corpus of engine responses under wire/testdata: the
// streams under streams/ and the error answers under errors/, in the shapes vLLM and
// SGLang write them, with what slogate must make of each (see each directory's
// README.md). It serves the tests of the packages that read responses, so that each runs
// its own rules over the same files.
package conformance

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/slogate/slogate/measure"
)

// Expect is what slogate must make of one transcript: the fields of measure.Result
// the corpus pins, in their label forms.
type Expect struct {
	Route        string `json:"route"`         // wire.Route's String form
	Outcome      string `json:"outcome"`       // measure.Outcome's String form
	OutputChunks int    `json:"output_chunks"` // chunks that carried output
	OutputTokens int    `json:"output_tokens"`
	Tokens       string `json:"tokens"` // measure.TokenSource's String form
	InputTokens  int    `json:"input_tokens"`
	Ended        bool   `json:"ended"`
	FinishReason string `json:"finish_reason"`
}

// Of returns the fields of res the corpus pins, for comparison with an Expect.
func Of(res measure.Result) Expect {
	return Expect{
		Route: res.Route.String(), Outcome: res.Outcome.String(), OutputChunks: res.OutputChunks, OutputTokens: res.OutputTokens,
		Tokens: res.Tokens.String(), InputTokens: res.InputTokens, Ended: res.Ended, FinishReason: res.FinishReason,
	}
}

// Entry is one file of the corpus: a response body as the engine sent it, with what
// slogate must make of it.
type Entry[E any] struct {
	Name   string // the file name, e.g. "vllm_chat_usage.sse"
	Body   []byte
	Expect E
}

// Stream is one transcript of the corpus.
type Stream = Entry[Expect]

// Dir returns the corpus directory, wire/testdata/streams of this module.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "wire", "testdata", "streams")
}

// Streams returns every transcript with its expectation, in file-name order. It fails
// when a transcript has no expectation or an expectation no transcript, so that no file
// of the corpus goes untested.
func Streams() ([]Stream, error) { return load[Expect](Dir(), "*.sse") }

// load reads the files of dir matching pattern (expect.json itself excepted) and their
// entries of dir/expect.json, decoded strictly, in file-name order. It fails when a file
// has no entry or an entry no file.
func load[E any](dir, pattern string) ([]Entry[E], error) {
	raw, err := os.ReadFile(filepath.Join(dir, "expect.json"))
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	var expect map[string]E
	if err := dec.Decode(&expect); err != nil {
		return nil, fmt.Errorf("conformance: %s: %w", filepath.Join(dir, "expect.json"), err)
	}
	names, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		return nil, err
	}
	var out []Entry[E]
	for _, f := range names {
		name := filepath.Base(f)
		if name == "expect.json" {
			continue
		}
		e, ok := expect[name]
		if !ok {
			return nil, fmt.Errorf("conformance: %s has no entry in expect.json", name)
		}
		delete(expect, name)
		body, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		out = append(out, Entry[E]{Name: name, Body: body, Expect: e})
	}
	if len(expect) > 0 {
		missing := make([]string, 0, len(expect))
		for n := range expect {
			missing = append(missing, n)
		}
		slices.Sort(missing)
		return nil, fmt.Errorf("conformance: %s names files that do not exist: %s", filepath.Join(dir, "expect.json"), strings.Join(missing, ", "))
	}
	return out, nil
}
