// Package settings reads a command's settings from one schema, a struct whose fields
// carry their flag name (`flag`), environment variable (`env`), default (`envDefault`)
// and meaning (`help`). Load fills the struct from the defaults, then the environment,
// then the flags, so a flag wins over its variable; Print and Markdown render the same
// tags as help text and documentation, so that neither can drift from what is read.
//
// An anonymous (embedded) struct field is a group: its settings take its place in the
// schema, so that commands share one definition of a group, its defaults included. A
// field tagged `secret:"true"` (a bearer token) never has its value shown: not in help,
// not as a flag's default. A schema keeps old flag names for a release by implementing
// Aliased: they still set their setting, warn once that they are deprecated, and are
// listed as such.
package settings

import (
	"errors"
	"flag"
	"fmt"
	"reflect"
	"strings"

	"github.com/caarlos0/env/v11"
)

// Setting describes one field of a schema, for help and docs.
type Setting struct {
	Flag, Env, Default, Help string
	Type                     string   // the field's Go type: string, bool, int, time.Duration, ...
	Secret                   bool     // the value is never shown
	Deprecated               []string // old flag names that still set it, without dashes
	index                    []int    // the field's index path, through its groups
}

// Alias is an old flag name, kept for a release, of the setting whose flag is New.
type Alias struct{ Old, New string }

// Aliased is a schema that keeps old flag names.
type Aliased interface {
	DeprecatedFlags() []Alias
}

// ErrUsage is returned for a flag mistake, which the flag set has already reported
// along with the usage text.
var ErrUsage = errors.New("usage error")

// Load fills cfg (a pointer to a schema) from environ (as os.Environ returns it) and
// then from args, registering one flag per setting, and one per alias, on fs. Its usage
// text is fs.Usage's followed by the settings table. It returns flag.ErrHelp for -h, an
// error wrapping ErrUsage for a flag mistake, and an error naming the variable for a
// value of the environment that does not parse.
func Load(fs *flag.FlagSet, cfg any, environ []string, args []string) error {
	if err := register(fs, cfg, environ); err != nil {
		return err
	}
	return Parse(fs, args)
}

// register fills cfg from its defaults and environ and registers its flags on fs, as
// Load describes.
func register(fs *flag.FlagSet, cfg any, environ []string) error {
	specs := Describe(cfg)
	vars := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	// The flags are registered holding the defaults alone: a flag set keeps a flag's
	// value at registration as its default, which flag.PrintDefaults shows, and that must
	// never be a value read from the environment (a key, a password in a URL).
	if err := env.ParseWithOptions(cfg, env.Options{Environment: map[string]string{}}); err != nil {
		return fmt.Errorf("settings: a default does not parse: %w", err) // a defect of the schema
	}
	v := reflect.ValueOf(cfg).Elem()
	for _, s := range specs {
		fv := fieldValue{v: v.FieldByIndex(s.index), secret: s.Secret}
		fs.Var(fv, s.Flag, s.Help)
		for _, old := range s.Deprecated {
			fs.Var(&aliasValue{fieldValue: fv, fs: fs, old: old, new: s.Flag}, old, "deprecated: use --"+s.Flag)
		}
	}
	if err := env.ParseWithOptions(cfg, env.Options{Environment: vars}); err != nil {
		return envError(cfg, err)
	}
	usage := fs.Usage
	fs.Usage = func() {
		if usage != nil {
			usage()
		}
		Print(fs.Output(), specs)
	}
	return nil
}

// Parse parses args with fs, which takes no positional arguments, and maps a flag
// mistake onto ErrUsage; -h gives flag.ErrHelp.
func Parse(fs *flag.FlagSet, args []string) error {
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "unexpected arguments: %q\n", fs.Args())
		return ErrUsage
	}
	return nil
}

// parseFlags parses args with fs, mapping a flag mistake onto ErrUsage.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	return nil
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

// Describe lists the settings of cfg's schema (a pointer to a struct) in field order,
// each group's in the group's place, with the aliases cfg keeps. It panics on a schema
// that cannot work — a field without a flag or env tag, a flag or variable named twice,
// a secret with a default, an alias of no setting or that hides a flag — as those are
// defects of the code, not of the input.
func Describe(cfg any) []Setting {
	t := reflect.TypeOf(cfg)
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		panic(fmt.Sprintf("settings: %T is not a pointer to a struct", cfg))
	}
	specs := describe(t.Elem(), nil, nil)
	flags, vars := map[string]int{}, map[string]bool{}
	for i, s := range specs {
		if _, dup := flags[s.Flag]; dup || vars[s.Env] {
			panic(fmt.Sprintf("settings: %s names --%s or %s twice", t.Elem(), s.Flag, s.Env))
		}
		flags[s.Flag], vars[s.Env] = i, true
	}
	if a, ok := cfg.(Aliased); ok {
		for _, al := range a.DeprecatedFlags() {
			i, ok := flags[al.New]
			if _, taken := flags[al.Old]; !ok || taken || al.Old == "" {
				panic(fmt.Sprintf("settings: %s: alias --%s of --%s: no such setting, or the old name is taken", t.Elem(), al.Old, al.New))
			}
			flags[al.Old] = -1
			specs[i].Deprecated = append(specs[i].Deprecated, al.Old)
		}
	}
	return specs
}

// describe appends the settings of struct type t, whose fields sit at index path
// prefix, to out, descending into embedded structs.
func describe(t reflect.Type, prefix []int, out []Setting) []Setting {
	for i := range t.NumField() {
		f := t.Field(i)
		index := append(append([]int(nil), prefix...), i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct && f.Tag.Get("flag") == "" {
			out = describe(f.Type, index, out)
			continue
		}
		s := Setting{
			Flag: f.Tag.Get("flag"), Env: f.Tag.Get("env"), Default: f.Tag.Get("envDefault"), Help: f.Tag.Get("help"),
			Type: f.Type.String(), Secret: f.Tag.Get("secret") == "true", index: index,
		}
		if s.Flag == "" || s.Env == "" || !f.IsExported() {
			panic(fmt.Sprintf("settings: field %s of %s lacks a flag or env tag, or is not exported", f.Name, t))
		}
		if s.Secret && s.Default != "" {
			panic(fmt.Sprintf("settings: the secret --%s has a default", s.Flag))
		}
		out = append(out, s)
	}
	return out
}

// aliasValue sets a setting under its old flag name, warning once that it is deprecated.
type aliasValue struct {
	fieldValue
	fs       *flag.FlagSet
	old, new string
	warned   bool
}

func (a *aliasValue) Set(s string) error {
	if !a.warned {
		a.warned = true
		fmt.Fprintf(a.fs.Output(), "warning: --%s is deprecated and goes in the next release; use --%s\n", a.old, a.new)
	}
	return a.fieldValue.Set(s)
}
