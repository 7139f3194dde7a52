package measure_test

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/slogate/slogate/clock"
	"github.com/slogate/slogate/internal/conformance"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/wire"
)

// TestStreamConformance runs the outcome and token rules over every transcript of the
// corpus (wire/testdata/streams): what the engines really write must be measured as the
// corpus says.
func TestStreamConformance(t *testing.T) {
	streams, err := conformance.Streams()
	if err != nil {
		t.Fatal(err)
	}
	routes := map[string]wire.Route{}
	for _, r := range wire.Routes() {
		routes[r.String()] = r
	}
	for _, s := range streams {
		t.Run(s.Name, func(t *testing.T) {
			route, ok := routes[s.Expect.Route]
			if !ok {
				t.Fatalf("unknown route %q", s.Expect.Route)
			}
			clk := clock.NewFake(time.Unix(1_700_000_000, 0))
			rec := measure.NewRecorder(route, true, measure.Options{Clock: clk})
			r := wire.NewSSEReader(bytes.NewReader(s.Body), wire.DefaultMaxEvent)
			for {
				ev, err := r.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("reading the transcript: %v", err)
				}
				clk.Step(10 * time.Millisecond)
				rec.Event(ev)
			}
			if got := conformance.Of(rec.Finish(200, measure.OK)); got != s.Expect {
				t.Errorf("measured\n  %+v\nwant\n  %+v", got, s.Expect)
			}
		})
	}
}
