package admission

import (
	"strconv"
	"strings"
	"testing"
)

// FuzzParseNames feeds arbitrary strings to the parsers of names: ParseClass, which reads
// the X-Slogate-Priority header of every client request, and ParseMode, which reads
// --admission. A class is always one of the classes (a header can never create a label
// value), and any but Interactive only from its exact name; a mode is parsed from its
// exact name only, and a refused one gets a message quoting it.
func FuzzParseNames(f *testing.F) {
	for _, s := range []string{"", "interactive", "batch", "probe", "Batch", " probe", "probe\x00", "unknown", "off", "shadow", "enforce", "ENFORCE"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c := ParseClass(s)
		if c >= numClasses || c.String() == "unknown" {
			t.Fatalf("ParseClass(%q) = %d, not a class", s, c)
		}
		if c != Interactive && c.String() != s {
			t.Fatalf("ParseClass(%q) = %v", s, c)
		}
		if ParseClass(c.String()) != c {
			t.Fatalf("ParseClass(%q) != %v", c.String(), c)
		}
		m, err := ParseMode(s)
		if err != nil {
			if m != Off || !strings.Contains(err.Error(), strconv.Quote(s)) {
				t.Fatalf("ParseMode(%q) = %v, %v", s, m, err)
			}
			return
		}
		if m.String() != s {
			t.Fatalf("ParseMode(%q) = %v", s, m)
		}
	})
}
