package main

import (
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// TestSetMemoryLimit: the garbage collector's limit is 90% of the container's, unless
// GOMEMLIMIT or AUTOMEMLIMIT=off says otherwise, and none without a container limit.
func TestSetMemoryLimit(t *testing.T) {
	const gib = 1 << 30
	for _, tc := range []struct {
		name     string
		env      map[string]string
		provider memlimit.Provider
		want     int64 // the limit in force after; 0: the one before
	}{
		{"a container limit", nil, memlimit.Limit(gib), gib * 9 / 10},
		{"another share", map[string]string{"AUTOMEMLIMIT": "0.5"}, memlimit.Limit(gib), gib / 2},
		{"GOMEMLIMIT set", map[string]string{"GOMEMLIMIT": "123MiB"}, memlimit.Limit(gib), 0},
		{"turned off", map[string]string{"AUTOMEMLIMIT": "off"}, memlimit.Limit(gib), 0},
		{"no container limit", nil, func() (uint64, error) { return 0, memlimit.ErrNoLimit }, math.MaxInt64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := debug.SetMemoryLimit(-1)
			defer debug.SetMemoryLimit(before)
			for _, k := range []string{"GOMEMLIMIT", "AUTOMEMLIMIT"} {
				t.Setenv(k, "") // restored after the test
				os.Unsetenv(k)
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			got := setMemoryLimit(slog.New(slog.DiscardHandler), memlimit.WithProvider(tc.provider))
			want := tc.want
			if want == 0 {
				want = before
			}
			if now := debug.SetMemoryLimit(-1); now != want {
				t.Errorf("limit %d after, want %d", now, want)
			}
			wantRet := want
			if want == math.MaxInt64 || tc.want == 0 { // none, or left as it was (none in tests)
				wantRet = 0
			}
			if got != wantRet {
				t.Errorf("setMemoryLimit = %d, want %d", got, wantRet)
			}
		})
	}
}
