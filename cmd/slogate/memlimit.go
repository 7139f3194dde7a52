package main

import (
	"errors"
	"log/slog"
	"math"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// setMemoryLimit gives the garbage collector a memory limit of 90% of the container's
// (the cgroup's, v1 or v2), so that under load it collects harder as the process nears
// the pod's limit instead of being killed past it. GOMEMLIMIT, when set, wins and is
// left as it is; AUTOMEMLIMIT=off turns this off and AUTOMEMLIMIT=0.8 takes another
// share. A process that finds no cgroup limit keeps Go's default (none). It returns the
// limit in force, 0 for none. opts are for tests (memlimit.WithProvider).
func setMemoryLimit(log *slog.Logger, opts ...memlimit.Option) int64 {
	limit, err := memlimit.Set(append([]memlimit.Option{memlimit.WithRatio(0.9)}, opts...)...)
	switch {
	case errors.Is(err, memlimit.ErrNoLimit):
		return 0
	case err != nil:
		log.Debug("no container memory limit found; GOMEMLIMIT not set", "err", err)
		return 0
	case limit <= 0 || limit == math.MaxInt64: // none
		return 0
	}
	log.Info("garbage collector memory limit", "GOMEMLIMIT", limit)
	return limit
}
