package synth

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind: a runner's streams,
// a scheduler's watcher, the simulator's engine loop or a client connection.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
