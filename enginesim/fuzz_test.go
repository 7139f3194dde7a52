package enginesim

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/slogate/slogate/wire"
)

// FuzzTokenize checks the stand-in tokenizer on any string: the count is the number of
// ids, every id is a text id of the vocabulary, the pieces are non-empty and put back
// together give the input exactly, and each piece read alone is one token.
func FuzzTokenize(f *testing.F) {
	for _, s := range []string{
		"", " ", "  ", "hello", " hello world", "a b, c.", "tabs\tand\nnewlines", "Ünïcödé ✓ 日本語",
		"\xff\xfe invalid utf8 \xc3", "abcdefghij0123456789", "  double  spaces  ", strings.Repeat(" the", 20), ".,;:!?",
	} {
		f.Add(s)
	}
	tok := tokenizer{vocab: 32000}
	f.Fuzz(func(t *testing.T, s string) {
		ids := tok.appendIDs(nil, s)
		if n := tok.count(s); n != len(ids) {
			t.Fatalf("count(%q) = %d, but %d ids", s, n, len(ids))
		}
		for _, id := range ids {
			if id < specialTokens || id >= tok.vocab {
				t.Fatalf("id %d outside [%d, %d)", id, specialTokens, tok.vocab)
			}
		}
		var b strings.Builder
		tok.pieces(s, func(p string) {
			if p == "" {
				t.Fatalf("empty piece in %q", s)
			}
			if n := tok.count(p); n != 1 {
				t.Errorf("piece %q of %q tokenises to %d tokens on its own, want 1", p, s, n)
			}
			b.WriteString(p)
		})
		if b.String() != s {
			t.Fatalf("pieces of %q join to %q", s, b.String())
		}
		if len(ids) > len(s) {
			t.Fatalf("%d tokens for %d bytes", len(ids), len(s))
		}
	})
}

// FuzzTokenizePrompt feeds arbitrary request bodies to the prompt decoder behind the
// generation endpoints and /tokenize: it never panics, and the ids it returns are in
// the vocabulary.
func FuzzTokenizePrompt(f *testing.F) {
	for _, s := range []string{
		`{"prompt":"hello"}`, `{"prompt":["hello"]}`, `{"prompt":[1,2,3]}`, `{"prompt":[[1,2,3]]}`,
		`{"prompt":null}`, `{"prompt":[]}`, `{"prompt":[[]]}`, `{"prompt":[99999999999999999999]}`,
		`{"messages":[{"role":"user","content":"hi"}]}`, `{"messages":[{"content":null}],"add_generation_prompt":false}`,
		`{"messages":[{"content":[{"type":"text","text":"a"},{"type":"image_url"}]}]}`, `{"messages":[{"content":7}]}`,
		`[]`, `null`, `"x"`, `{`, ``,
	} {
		f.Add([]byte(s), uint8(0))
	}
	tok := tokenizer{vocab: 32000}
	f.Fuzz(func(t *testing.T, body []byte, r uint8) {
		route := []wire.Route{wire.RouteUnknown, wire.RouteCompletions, wire.RouteChatCompletions}[int(r)%3]
		ids, err := tok.tokenize(route, body)
		if err != nil {
			if ids != nil {
				t.Errorf("tokenize returned %d ids with its error %v", len(ids), err)
			}
			return
		}
		for _, id := range ids {
			if id < 0 || id >= tok.vocab {
				t.Fatalf("id %d outside [0, %d) for body %q", id, tok.vocab, body)
			}
		}
	})
}

// FuzzParseIDs: the fast path for token-id prompts agrees with encoding/json on every
// input it accepts.
func FuzzParseIDs(f *testing.F) {
	for _, s := range []string{"[1,2,3]", "[ 0 , 17 ]", "[]", "[01]", "[1,]", "[1 2]", "[-1]", "[1.5]", `["a"]`, "[99999999999]"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		ids, ok := parseIDs(raw)
		if !ok {
			return
		}
		var want []int
		if err := json.Unmarshal(raw, &want); err != nil {
			t.Fatalf("parseIDs accepted %q, which encoding/json rejects: %v", raw, err)
		}
		if !slices.Equal(ids, want) {
			t.Fatalf("parseIDs(%q) = %v, encoding/json says %v", raw, ids, want)
		}
	})
}
