package sidecar

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: every sidecar a test runs is
// stopped, with its loops, listeners and connections.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
