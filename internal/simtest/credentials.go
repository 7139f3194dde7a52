package simtest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/slogate/slogate/enginesim"
)

// Credentials are the secrets a test of credential hygiene hands to slogate, the files
// that carry them, and an engine profile whose calibration finishes in seconds.
type Credentials struct {
	Key, Password, AdminToken string // the engine's API key, a password in its URL, the admin token
	// ProbeFile holds ProbeWorkload, TiersFile GuessedTiers and TokenFile AdminToken.
	ProbeFile, TiersFile, TokenFile string
	// Profile is an engine of eight sequences at 5 ms a token: its knee, near 200
	// requests/s of 8 tokens, takes one-second rounds six points or so to find (about 8 s).
	Profile enginesim.Profile
}

// NewCredentials writes the files of a Credentials in a directory removed when the test
// ends.
func NewCredentials(t testing.TB) Credentials {
	t.Helper()
	dir := t.TempDir()
	c := Credentials{
		Key: "upstream-secret-5d2e", Password: "url-secret-c4a1", AdminToken: "admin-secret-0b7f",
		ProbeFile: filepath.Join(dir, "probe.yaml"), TiersFile: filepath.Join(dir, "tiers.yaml"), TokenFile: filepath.Join(dir, "admin-token"),
	}
	for path, text := range map[string]string{c.ProbeFile: ProbeWorkload, c.TiersFile: GuessedTiers, c.TokenFile: c.AdminToken + "\n"} {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	p, err := enginesim.LookupProfile("tiny")
	if err != nil {
		t.Fatal(err)
	}
	p.MaxNumSeqs, p.Timing = 8, enginesim.Timing{StepBase: 0.005}
	c.Profile = p
	return c
}

// All returns the secrets, for NoSecrets.
func (c Credentials) All() []string { return []string{c.Key, c.Password, c.AdminToken} }
