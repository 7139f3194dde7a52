package enginesim

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind: the engine loop
// (Server.Run), a request handler or a client connection.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
