package synth

import (
	"fmt"
	"math"
	"slices"
)

// maxCells bounds the cells of one workload, so that a typo cannot plan a week of load.
const maxCells = 1024

// Validate reports the first inconsistent setting of w.
func (w Workload) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidWorkload, w.Name, fmt.Sprintf(format, args...))
	}
	if _, err := ParseRoute(w.Route); err != nil && w.Name != "" {
		return bad("%v", err)
	}
	switch {
	case w.Name == "":
		return fmt.Errorf("%w: a workload needs a name", ErrInvalidWorkload)
	case w.Duration < 0 || w.Requests < 0 || w.Rounds < 0 || w.SharedPrefix < 0:
		return bad("duration, requests, rounds and shared_prefix must not be negative")
	case w.Duration == 0 && w.Requests == 0:
		return bad("rounds need a duration or a number of requests")
	case !(w.Agreement >= 0 && w.Agreement < 1):
		return bad("agreement must be in [0,1)")
	case !positive(w.Concurrency) && w.Kind != Scan:
		return bad("concurrency must list positive numbers")
	}
	for _, s := range w.Shapes {
		if s.Input < 1 || s.Output < 1 || s.Name == "" {
			return bad("shape %q needs a name and positive input and output lengths", s.Name)
		}
	}
	switch w.Kind {
	case Matrix:
		if !positive(w.Contexts) || w.Output < 1 {
			return bad("a matrix needs positive contexts and output")
		}
		if len(w.Contexts)*len(w.Concurrency) > maxCells {
			return bad("more than %d cells", maxCells)
		}
	case Shapes:
		if len(w.Shapes) == 0 || len(w.Shapes)*len(w.Concurrency) > maxCells {
			return bad("shapes needs 1 to %d cells", maxCells)
		}
	case Scan:
		if len(w.Shapes) != 1 || len(w.Multiples) == 0 || len(w.Multiples) > maxCells {
			return bad("a scan needs one shape and some multiples")
		}
		if slices.ContainsFunc(w.Multiples, func(m float64) bool { return !(m > 0) || math.IsInf(m, 0) }) {
			return bad("multiples must be positive")
		}
		if !(w.ReferenceRate >= 0) || math.IsInf(w.ReferenceRate, 0) || w.ReferenceRate == 0 && w.CalibrationConcurrency < 1 {
			return bad("a scan needs a reference_rate or a calibration_concurrency")
		}
		if w.Arrival != "" && w.Arrival != "constant" && w.Arrival != "poisson" {
			return bad("arrival is constant or poisson")
		}
	default:
		return bad("kind %q is not matrix, shapes or scan", w.Kind)
	}
	return nil
}

func positive(xs []int) bool {
	return len(xs) > 0 && !slices.ContainsFunc(xs, func(x int) bool { return x < 1 })
}

// withDefaults fills what a valid workload may leave out: one round, 6% agreement,
// Poisson arrivals.
func (w Workload) withDefaults() Workload {
	if w.Rounds == 0 {
		w.Rounds = 1
	}
	if w.Agreement == 0 {
		w.Agreement = 0.06
	}
	if w.Arrival == "" {
		w.Arrival = "poisson"
	}
	return w
}
