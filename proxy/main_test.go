package proxy_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: a proxied request, a
// connection of the proxy's transport, a simulator loop or a test server.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
