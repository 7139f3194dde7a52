package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/caarlos0/env/v11"
)

// A settings struct lists a command's settings once: each field carries its environment
// variable (`env`), default (`envDefault`), flag name (`flag`) and description (`help`).
// loadSettings reads defaults, then the environment, then flags, so a flag wins over its
// variable; the help text and docs are generated from the same tags, so they cannot drift.

// setting describes one field of a settings struct, for help and docs.
type setting struct {
	Flag, Env, Default, Help string
}

// loadSettings fills cfg (a pointer to a settings struct) from environ (as os.Environ
// returns it) and then from args, registering one flag per field on fs.
func loadSettings(fs *flag.FlagSet, cfg any, environ []string, args []string) error {
	vars := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	if err := env.ParseWithOptions(cfg, env.Options{Environment: vars}); err != nil {
		return envError(cfg, err)
	}
	specs := describeSettings(cfg)
	v := reflect.ValueOf(cfg).Elem()
	for i, s := range specs {
		fs.Var(fieldValue{v.Field(i)}, s.Flag, s.Help)
	}
	usage := fs.Usage
	fs.Usage = func() {
		if usage != nil {
			usage()
		}
		printSettings(fs.Output(), specs)
	}
	return parseFlags(fs, args)
}

// envError names the variable behind each value the environment parser refused.
func envError(cfg any, err error) error {
	var agg env.AggregateError
	if !errors.As(err, &agg) {
		return fmt.Errorf("reading settings from the environment: %w", err)
	}
	t := reflect.TypeOf(cfg).Elem()
	var msgs []string
	for _, e := range agg.Errors {
		var pe env.ParseError
		if errors.As(e, &pe) {
			if f, ok := t.FieldByName(pe.Name); ok {
				msgs = append(msgs, fmt.Sprintf("%s: %v", f.Tag.Get("env"), pe.Err))
				continue
			}
		}
		msgs = append(msgs, e.Error())
	}
	return fmt.Errorf("reading settings from the environment: %s", strings.Join(msgs, "; "))
}

// describeSettings lists the settings of cfg's struct type in field order. Every field
// must carry the flag and env tags.
func describeSettings(cfg any) []setting {
	t := reflect.TypeOf(cfg).Elem()
	out := make([]setting, t.NumField())
	for i := range out {
		f := t.Field(i)
		out[i] = setting{Flag: f.Tag.Get("flag"), Env: f.Tag.Get("env"), Default: f.Tag.Get("envDefault"), Help: f.Tag.Get("help")}
		if out[i].Flag == "" || out[i].Env == "" {
			panic(fmt.Sprintf("settings field %s lacks a flag or env tag", f.Name))
		}
	}
	return out
}

// printSettings writes the settings as a table: flag, variable, default, meaning.
func printSettings(w io.Writer, specs []setting) {
	fmt.Fprintln(w, "\nSettings (a flag wins over its environment variable):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  FLAG\tVARIABLE\tDEFAULT\tMEANING")
	for _, s := range specs {
		def := s.Default
		if def == "" {
			def = `""`
		}
		fmt.Fprintf(tw, "  --%s\t%s\t%s\t%s\n", s.Flag, s.Env, def, s.Help)
	}
	tw.Flush()
}

// fieldValue is a flag.Value that parses into one settings field with the same rules
// the environment parser applies.
type fieldValue struct{ v reflect.Value }

var durationType = reflect.TypeFor[time.Duration]()

func (f fieldValue) String() string {
	if !f.v.IsValid() {
		return ""
	}
	return fmt.Sprint(f.v.Interface())
}

func (f fieldValue) IsBoolFlag() bool { return f.v.IsValid() && f.v.Kind() == reflect.Bool }

func (f fieldValue) Set(s string) error {
	switch {
	case f.v.Type() == durationType:
		d, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		f.v.SetInt(int64(d))
	case f.v.Kind() == reflect.String:
		f.v.SetString(s)
	case f.v.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return err
		}
		f.v.SetBool(b)
	case f.v.CanInt():
		// As caarlos0/env parses the variable: decimal only, and an int in 32 bits, so
		// that a flag and its variable accept the same values.
		bits := f.v.Type().Bits()
		if f.v.Kind() == reflect.Int {
			bits = 32
		}
		n, err := strconv.ParseInt(s, 10, bits)
		if err != nil {
			return err
		}
		f.v.SetInt(n)
	case f.v.CanFloat():
		x, err := strconv.ParseFloat(s, f.v.Type().Bits())
		if err != nil {
			return err
		}
		f.v.SetFloat(x)
	default:
		return fmt.Errorf("unsupported setting type %s", f.v.Type())
	}
	return nil
}
