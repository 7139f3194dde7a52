package proxy

import (
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/slogate/slogate/wire"
)

// TestBoundContent: the prompt's text is cut at the bound, on a character, and what
// follows the cut is dropped.
func TestBoundContent(t *testing.T) {
	msg := func(role string, parts ...string) wire.Content {
		c := wire.Content{Role: role}
		for _, p := range parts {
			c.Parts = append(c.Parts, wire.Part{Type: "text", Content: p})
		}
		return c
	}
	for _, tc := range []struct {
		name string
		in   []wire.Content
		n    int
		want []wire.Content
		cut  bool
	}{
		{"within", []wire.Content{msg("system", "ab"), msg("user", "cd")}, 4, []wire.Content{msg("system", "ab"), msg("user", "cd")}, false},
		{"cut in the second message", []wire.Content{msg("system", "ab"), msg("user", "cdef", "gh"), msg("user", "ij")}, 4, []wire.Content{msg("system", "ab"), msg("user", "cd")}, true},
		{"cut on a character", []wire.Content{msg("user", "aé")}, 2, []wire.Content{msg("user", "a")}, true},
		{"none", nil, 4, []wire.Content{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, cut := boundContent(tc.in, tc.n)
			if !reflect.DeepEqual(got, tc.want) || cut != tc.cut {
				t.Errorf("boundContent = %+v, %v; want %+v, %v", got, cut, tc.want, tc.cut)
			}
		})
	}
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
