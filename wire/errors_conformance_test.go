package wire_test

import (
	"testing"

	"github.com/slogate/slogate/internal/conformance"
	"github.com/slogate/slogate/wire"
)

// TestErrorConformance decodes every error answer of the corpus (wire/testdata/errors):
// whatever shape the engine wrote, DecodeError must read its message, type and code.
func TestErrorConformance(t *testing.T) {
	answers, err := conformance.Errors()
	if err != nil {
		t.Fatal(err)
	}
	if len(answers) == 0 {
		t.Fatal("the corpus has no error answers")
	}
	for _, a := range answers {
		t.Run(a.Name, func(t *testing.T) {
			e, err := wire.DecodeError(a.Body)
			if err != nil {
				t.Fatalf("DecodeError: %v", err)
			}
			code := 0
			if c, ok := e.Code.(int); ok {
				code = c
			} else if e.Code != nil {
				t.Errorf("code %#v, want an int or none", e.Code)
			}
			if e.Message != a.Expect.Message || e.Type != a.Expect.Type || code != a.Expect.Code {
				t.Errorf("decoded message %q, type %q, code %d; want %q, %q, %d", e.Message, e.Type, code, a.Expect.Message, a.Expect.Type, a.Expect.Code)
			}
		})
	}
}
