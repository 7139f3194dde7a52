package exporter

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/engine"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/wire"
)

// TestTypedNilSources checks that nil pointers wrapped in the source interfaces count
// as absent: New and scrapes do not call them.
func TestTypedNilSources(t *testing.T) {
	m, reg := newMetrics(t, Options{
		InFlight:  (*inFlightPtr)(nil),
		Engine:    (*engine.Scraper)(nil),
		Admission: (*admission.Controller)(nil),
		Reloads:   (*admission.Reloader)(nil),
	})
	m.Observe(wire.Request{Model: "x"}, measure.Result{Outcome: measure.OK, Status: 200, E2E: time.Second})
	for _, prefix := range []string{"slogate_inflight_", "slogate_engine_", "slogate_admission_"} {
		if got := samples(t, reg, prefix); len(got) != 0 {
			t.Errorf("%s metrics from a nil source: %v", prefix, got)
		}
	}
	if n, err := testutil.GatherAndCount(reg, "slogate_requests_total"); err != nil || n != 1 {
		t.Errorf("slogate_requests_total: %d series (err %v), want 1", n, err)
	}
}

// inFlightPtr is an InFlightSource with a pointer receiver that panics on nil.
type inFlightPtr struct{ n int }

func (p *inFlightPtr) InFlight() (int, int64) { return p.n, 0 }

func TestAbsent(t *testing.T) {
	var nilIface InFlightSource
	tests := []struct {
		name string
		v    any
		want bool
	}{
		{"nil", nil, true},
		{"nil interface", nilIface, true},
		{"nil pointer", (*inFlightPtr)(nil), true},
		{"nil func", (func())(nil), true},
		{"nil map", map[string]int(nil), true},
		{"pointer", &inFlightPtr{}, false},
		{"struct value", inFlightStub{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := absent(tc.v); got != tc.want {
				t.Errorf("absent(%#v) = %v, want %v", tc.v, got, tc.want)
			}
		})
	}
}
