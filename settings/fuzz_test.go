package settings_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/slogate/slogate/settings"
	"github.com/slogate/slogate/sidecar"
)

// FuzzSettings feeds an arbitrary value to one of serve's settings (sidecar.Config has a
// setting of every type the loader reads, and groups), once as its environment variable
// and once as its flag. The two must mean the same (the design's
// "every setting is an environment variable and a flag of the same meaning", and
// fieldValue's "with the same rules the environment parser applies"): both accept the
// value, giving the same settings, or both refuse it, naming the variable or the flag.
// An empty variable counts as unset, so empty values are not compared.
func FuzzSettings(f *testing.F) {
	specs := settings.Describe(&sidecar.Config{})
	index := func(flagName string) uint8 {
		for i, s := range specs {
			if s.Flag == flagName {
				return uint8(i)
			}
		}
		f.Fatalf("no setting --%s", flagName)
		return 0
	}
	for _, c := range []struct{ flag, value string }{
		{"upstream", "http://127.0.0.1:8000"}, {"slo-ttft", "2s"}, {"slo-ttft", "1h2m3.5s"}, {"slo-ttft", "5"},
		{"saturation-kv", "0.95"}, {"saturation-kv", "NaN"}, {"saturation-kv", "1e400"}, {"saturation-kv", "0x1p-2"},
		{"inject-usage", "false"}, {"inject-usage", "T"}, {"inject-usage", "yes"},
		{"max-body-bytes", "1048576"}, {"max-body-bytes", "-1"}, {"max-body-bytes", "1e6"}, {"max-body-bytes", "99999999999999999999"},
		{"calibrate-output", "128"}, {"calibrate-output", "+7"}, {"push-labels", `pod="a",namespace="b"`}, {"dcgm", "localhost:5555"},
		// Flags once read integers in any base and in 64 bits, variables in base 10 (32 bits for int).
		{"max-body-bytes", "010"}, {"max-body-bytes", "0x10"}, {"max-body-bytes", "1_000"}, {"calibrate-output", "3000000000"},
	} {
		f.Add(index(c.flag), c.value)
	}
	f.Fuzz(func(t *testing.T, i uint8, value string) {
		s := specs[int(i)%len(specs)]
		var fromEnv, fromFlag sidecar.Config
		envErr := settings.Load(quietFlags(nil), &fromEnv, []string{s.Env + "=" + value}, nil)
		var out bytes.Buffer
		flagErr := settings.Load(quietFlags(&out), &fromFlag, nil, []string{"--" + s.Flag + "=" + value})
		if envErr != nil && !strings.Contains(envErr.Error(), s.Env) {
			t.Fatalf("%s=%q: the error %q does not name the variable", s.Env, value, envErr)
		}
		if flagErr != nil && !strings.Contains(out.String(), "-"+s.Flag) {
			t.Fatalf("--%s=%q: the message %q does not name the flag", s.Flag, value, out.String())
		}
		if value == "" {
			return
		}
		if (envErr == nil) != (flagErr == nil) {
			t.Fatalf("%q: as %s, error %v; as --%s, error %v (%s)", value, s.Env, envErr, s.Flag, flagErr, strings.TrimSpace(out.String()))
		}
		if a, b := fmt.Sprintf("%+v", fromEnv), fmt.Sprintf("%+v", fromFlag); envErr == nil && a != b {
			t.Fatalf("%q means one thing as %s and another as --%s:\n%s\n%s", value, s.Env, s.Flag, a, b)
		}
	})
}
