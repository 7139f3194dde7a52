package proxy

import (
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/slogate/slogate/wire"
)

// TestBoundContent: whatever the prompt, its JSON stays within the bound (plus the
// brackets of the list), cut on a character, and what it keeps is a prefix of it.
func TestBoundContent(t *testing.T) {
	msg := func(role string, parts ...string) wire.Content {
		c := wire.Content{Role: role}
		for _, p := range parts {
			c.Parts = append(c.Parts, wire.Part{Type: "text", Content: p})
		}
		return c
	}
	many := make([]wire.Content, 200000)
	for i := range many {
		many[i] = msg("user")
	}
	for _, tc := range []struct {
		name string
		in   []wire.Content
		cut  bool
	}{
		{"within", []wire.Content{msg("system", "be brief"), msg("user", "hi")}, false},
		{"one long part", []wire.Content{msg("user", strings.Repeat("a", 100000))}, true},
		{"escapes", []wire.Content{msg("user", strings.Repeat("\u2039\"\n\x01", 30000))}, true},
		{"many empty messages", many, true},
		{"a long role", []wire.Content{msg(strings.Repeat("r", 1<<20), "x")}, false},
		{"cut in the second message", []wire.Content{msg("system", strings.Repeat("s", 60000)), msg("user", strings.Repeat("u", 60000), "v")}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, cut := boundContent(tc.in, maxContent)
			js := encodeJSON(got)
			if len(js) > maxContent+2 || cut != tc.cut || !utf8.ValidString(js) {
				t.Errorf("%d bytes of JSON (bound %d), cut %v (want %v), valid UTF-8 %v", len(js), maxContent, cut, tc.cut, utf8.ValidString(js))
			}
			for i, m := range got {
				if i >= len(tc.in) || !strings.HasPrefix(tc.in[i].Role, m.Role) || len(m.Parts) > len(tc.in[i].Parts) {
					t.Fatalf("message %d is not a prefix of the input's", i)
				}
				for k, p := range m.Parts {
					if !strings.HasPrefix(tc.in[i].Parts[k].Content, p.Content) {
						t.Fatalf("message %d part %d is not a prefix of the input's", i, k)
					}
				}
			}
			if !cut && !reflect.DeepEqual(got, boundRoles(tc.in)) {
				t.Errorf("uncut, it changed the messages")
			}
		})
	}
}

// boundRoles is msgs with each role cut at maxRole, as boundContent cuts them.
func boundRoles(msgs []wire.Content) []wire.Content {
	out := make([]wire.Content, len(msgs))
	for i, m := range msgs {
		m.Role = cutUTF8(m.Role, maxRole)
		out[i] = m
	}
	return out
}

func TestCutUTF8(t *testing.T) {
	s := strings.Repeat("é", 10) // 2 bytes each
	for n := -1; n <= len(s)+1; n++ {
		got := cutUTF8(s, n)
		if !utf8.ValidString(got) || len(got) > max(n, 0) || len(got) < min(max(n, 0), len(s))-1 {
			t.Errorf("cutUTF8(_, %d) = %q (%d bytes)", n, got, len(got))
		}
	}
}
