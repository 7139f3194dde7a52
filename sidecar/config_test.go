package sidecar

import (
	"strings"
	"testing"
	"time"
)

// TestServerTimeoutsChecked: a data listener timeout that is not positive, which would
// leave slow or idle clients their connections for ever, is refused at start.
func TestServerTimeoutsChecked(t *testing.T) {
	cases := []struct {
		name string
		edit func(*Config)
	}{
		{"read-header timeout 0", func(s *Config) { s.ReadHeaderTimeout = 0 }},
		{"negative read-header timeout", func(s *Config) { s.ReadHeaderTimeout = -time.Second }},
		{"idle timeout 0", func(s *Config) { s.IdleTimeout = 0 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig("http://127.0.0.1:1")
			tc.edit(&cfg)
			if _, err := New(cfg, Options{}); err == nil || !strings.Contains(err.Error(), "timeout") {
				t.Errorf("New: %v, want an error naming the timeout", err)
			}
		})
	}
}
