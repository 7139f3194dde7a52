package settings_test

import (
	"bytes"
	"errors"
	"flag"
	"slices"
	"testing"

	"github.com/slogate/slogate/settings"
)

// operandsSchema is a schema of a command that takes operands.
type operandsSchema struct {
	Out   string `flag:"out" env:"SLOGATE_OUT" envDefault:"here" help:"where"`
	Quick bool   `flag:"quick" env:"SLOGATE_QUICK" envDefault:"false" help:"fast"`
}

func TestLoadOperands(t *testing.T) {
	cases := []struct {
		name     string
		env      []string
		args     []string
		operands []string
		want     operandsSchema
		wantErr  error
	}{
		{name: "none", want: operandsSchema{Out: "here"}},
		{name: "operands after the flags", args: []string{"--out", "x", "a", "b"}, operands: []string{"a", "b"}, want: operandsSchema{Out: "x"}},
		{name: "flags after the operands", env: []string{"SLOGATE_OUT=env"}, args: []string{"a", "--quick", "b", "--out=y"},
			operands: []string{"a", "b"}, want: operandsSchema{Out: "y", Quick: true}},
		{name: "the environment alone", env: []string{"SLOGATE_OUT=env"}, args: []string{"a"}, operands: []string{"a"}, want: operandsSchema{Out: "env"}},
		{name: "everything after -- is an operand", args: []string{"a", "--", "--out", "-b"}, operands: []string{"a", "--out", "-b"}, want: operandsSchema{Out: "here"}},
		{name: "a lone dash is an operand", args: []string{"-", "--quick"}, operands: []string{"-"}, want: operandsSchema{Out: "here", Quick: true}},
		{name: "an unknown flag among operands", args: []string{"a", "--nope"}, wantErr: settings.ErrUsage},
		{name: "help", args: []string{"a", "-h"}, wantErr: flag.ErrHelp},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			var cfg operandsSchema
			ops, err := settings.LoadOperands(quietFlags(&out), &cfg, tc.env, tc.args)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("error %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ops, tc.operands) || cfg != tc.want {
				t.Errorf("operands %q, settings %+v; want %q, %+v", ops, cfg, tc.operands, tc.want)
			}
		})
	}
}
