package wire

import (
	"encoding/json"
	"errors"
	"testing"
)

// FuzzDecodeChunk: DecodeChunk and DecodeError never panic, fail only with this
// package's sentinels, and a decoded chunk survives an encode/decode round trip with the
// same output, usage and finish reason.
func FuzzDecodeChunk(f *testing.F) {
	for _, s := range []string{
		`{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" hi","logprobs":null,"finish_reason":null,"stop_reason":null}],"usage":null}`,
		`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"reasoning_content":"think","tool_calls":[{"index":0,"function":{"name":"f","arguments":"{}"}}]},"finish_reason":"stop"}]}`,
		`{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`,
		`{"error":{"message":"bad","type":"BadRequestError","param":null,"code":400}}`,
		`{"object":"error","message":"flat","type":"x","code":"y"}`,
		`[1,2]`, `{"choices":{}}`, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, errE := DecodeError(data)
		if errE != nil && !errors.Is(errE, ErrMalformed) && !errors.Is(errE, ErrUnexpectedShape) {
			t.Fatalf("DecodeError: unexpected error kind: %v", errE)
		}
		c, err := DecodeChunk(data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnexpectedShape) {
				t.Fatalf("DecodeChunk: unexpected error kind: %v", err)
			}
			return
		}
		if c.Error != nil {
			return // an error chunk encodes as the error body alone
		}
		enc, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("re-encoding a decoded chunk: %v", err)
		}
		c2, err := DecodeChunk(enc)
		if err != nil {
			t.Fatalf("decoding the re-encoded chunk %s: %v", enc, err)
		}
		if c.OutputBytes() != c2.OutputBytes() || c.UsageOnly() != c2.UsageOnly() {
			t.Fatalf("round trip changed output: %d/%v -> %d/%v (%s)", c.OutputBytes(), c.UsageOnly(), c2.OutputBytes(), c2.UsageOnly(), enc)
		}
		r1, ok1 := c.Finished()
		r2, ok2 := c2.Finished()
		if r1 != r2 || ok1 != ok2 {
			t.Fatalf("round trip changed finish reason: %q/%v -> %q/%v", r1, ok1, r2, ok2)
		}
	})
}
