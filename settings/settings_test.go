package settings_test

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/slogate/slogate/settings"
	"github.com/slogate/slogate/sidecar"
)

func TestLoad(t *testing.T) {
	cases := []struct {
		name    string
		env     []string
		args    []string
		check   func(sidecar.Config) bool
		wantErr string
	}{
		{name: "defaults", check: func(s sidecar.Config) bool {
			return s.Upstream == "http://127.0.0.1:8000" && s.SLOTTFT == 2*time.Second && s.SLOTPOT == 100*time.Millisecond && s.InjectUsage && s.MaxBodyBytes == 64<<20 &&
				s.ReadHeaderTimeout == 10*time.Second && s.IdleTimeout == 2*time.Minute && s.CalibrateOutput == 128 && s.LogLevel == "info"
		}},
		{name: "environment", env: []string{"SLOGATE_UPSTREAM=http://engine:9000", "SLOGATE_SLO_TTFT=1500ms", "SLOGATE_INJECT_USAGE=false"},
			check: func(s sidecar.Config) bool {
				return s.Upstream == "http://engine:9000" && s.SLOTTFT == 1500*time.Millisecond && !s.InjectUsage
			}},
		{name: "a flag wins over its variable", env: []string{"SLOGATE_SLO_TPOT=50ms", "SLOGATE_LISTEN=:1", "SLOGATE_PUSH_URL=http://a"},
			args: []string{"--slo-tpot", "80ms", "--inject-usage=false", "--max-body-bytes", "1024", "--push-url", "http://b"},
			check: func(s sidecar.Config) bool {
				return s.SLOTPOT == 80*time.Millisecond && s.Listen == ":1" && !s.InjectUsage && s.MaxBodyBytes == 1024 && s.PushURL == "http://b"
			}},
		{name: "bad environment value", env: []string{"SLOGATE_SLO_TTFT=soon"}, wantErr: "SLOGATE_SLO_TTFT"},
		{name: "bad flag value", args: []string{"--slo-ttft", "soon"}, wantErr: "usage error"},
		{name: "positional argument", args: []string{"extra"}, wantErr: "usage error"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var s sidecar.Config
			err := settings.Load(quietFlags(nil), &s, tc.env, tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one mentioning %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(s) {
				t.Errorf("settings not as expected: %+v", s)
			}
		})
	}
}

// Group and schema are a schema with groups, a secret and old flag names.
type Group struct {
	URL string `flag:"url" env:"T_URL" envDefault:"http://x" help:"where"`
	Key string `flag:"key" env:"T_KEY" envDefault:"" secret:"true" help:"bearer token"`
}

type Inner struct {
	N int `flag:"n" env:"T_N" envDefault:"3" help:"how many"`
}

type Outer struct {
	Inner
	Wait time.Duration `flag:"wait" env:"T_WAIT" envDefault:"1s" help:"how long"`
}

type schema struct {
	Name string `flag:"name" env:"T_NAME" envDefault:"a" help:"a name"`
	Group
	Outer
	Quick bool `flag:"quick" env:"T_QUICK" envDefault:"false" help:"be quick"`
}

func (schema) DeprecatedFlags() []settings.Alias {
	return []settings.Alias{{Old: "target", New: "url"}, {Old: "api-key", New: "key"}, {Old: "count", New: "n"}}
}

// TestGroups: the settings of embedded structs, nested too, take the groups' places and
// are read from the environment and from flags like any other.
func TestGroups(t *testing.T) {
	var flags []string
	for _, s := range settings.Describe(&schema{}) {
		flags = append(flags, s.Flag)
	}
	if got, want := strings.Join(flags, " "), "name url key n wait quick"; got != want {
		t.Errorf("settings %q, want %q", got, want)
	}
	var s schema
	if err := settings.Load(quietFlags(nil), &s, []string{"T_URL=http://env", "T_N=5"}, []string{"--wait", "2s", "--n", "7"}); err != nil {
		t.Fatal(err)
	}
	if s.URL != "http://env" || s.N != 7 || s.Wait != 2*time.Second || s.Name != "a" {
		t.Errorf("settings not as expected: %+v", s)
	}
	var d schema
	if err := settings.Load(quietFlags(nil), &d, nil, nil); err != nil || d.URL != "http://x" || d.N != 3 || d.Wait != time.Second {
		t.Errorf("defaults not as expected: %+v, %v", d, err)
	}
}

// TestAliases: an old flag name sets its setting, warns once, naming the new flag, and
// is listed as deprecated in the usage text and in the Markdown table.
func TestAliases(t *testing.T) {
	var out bytes.Buffer
	var s schema
	if err := settings.Load(quietFlags(&out), &s, nil, []string{"--target", "http://old", "--count=9", "--count", "4", "--quick"}); err != nil {
		t.Fatal(err)
	}
	if s.URL != "http://old" || s.N != 4 || !s.Quick {
		t.Errorf("settings not as expected: %+v", s)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "--target is deprecated") || !strings.Contains(lines[0], "use --url") ||
		!strings.Contains(lines[1], "--count is deprecated") || !strings.Contains(lines[1], "use --n") {
		t.Errorf("want one warning per old flag used, naming the new one; got:\n%s", out.String())
	}
	var usage bytes.Buffer
	settings.Print(&usage, settings.Describe(&schema{}))
	for _, want := range []string{"Deprecated flags", "--target  ", "use --url", "--api-key", "use --key", "--count"} {
		if !strings.Contains(usage.String(), want) {
			t.Errorf("usage lacks %q:\n%s", want, usage.String())
		}
	}
	md := settings.Markdown(settings.Describe(&schema{}))
	if !strings.Contains(md, "`--target` (use `--url`), `--api-key` (use `--key`), `--count` (use `--n`)") {
		t.Errorf("Markdown lacks the deprecated flags:\n%s", md)
	}
}

// TestSecretNeverShown: a secret read from the environment appears neither in the usage
// text (printed on -h and on every flag mistake) nor as a flag's default.
func TestSecretNeverShown(t *testing.T) {
	const key = "sk-very-secret-value"
	for _, args := range [][]string{{"-h"}, {"--no-such-flag"}, {"--n", "x"}} {
		var out bytes.Buffer
		fs := quietFlags(&out)
		var s schema
		err := settings.Load(fs, &s, []string{"T_KEY=" + key, "T_URL=http://u:" + key + "@h"}, args)
		if err == nil {
			t.Fatalf("%v: no error", args)
		}
		if !strings.Contains(out.String(), "--key") || strings.Contains(out.String(), key) {
			t.Errorf("%v: the usage text names no --key, or shows the key:\n%s", args, out.String())
		}
		if f := fs.Lookup("key"); f.DefValue != "" || f.Value.String() != "" || fs.Lookup("api-key").DefValue != "" {
			t.Errorf("%v: the flag set shows the key as --key's value or default", args)
		}
	}
}

func TestDescribeRefusesBadSchemas(t *testing.T) {
	type noEnv struct {
		A string `flag:"a"`
	}
	type dupFlag struct {
		Group
		URL2 string `flag:"url" env:"T_URL2"`
	}
	type dupEnv struct {
		Group
		URL2 string `flag:"url2" env:"T_URL"`
	}
	type secretDefault struct {
		K string `flag:"k" env:"T_K" envDefault:"x" secret:"true"`
	}
	for name, cfg := range map[string]any{
		"no env tag": &noEnv{}, "a flag twice": &dupFlag{}, "a variable twice": &dupEnv{}, "a secret default": &secretDefault{},
		"an alias of nothing": &badAlias{}, "an alias hiding a flag": &hidingAlias{}, "not a pointer": schema{},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("Describe accepted it")
				}
			}()
			settings.Describe(cfg)
		})
	}
}

type badAlias struct{ Group }

func (badAlias) DeprecatedFlags() []settings.Alias {
	return []settings.Alias{{Old: "old", New: "nope"}}
}

type hidingAlias struct{ Group }

func (hidingAlias) DeprecatedFlags() []settings.Alias {
	return []settings.Alias{{Old: "key", New: "url"}}
}

func TestHelp(t *testing.T) {
	var out bytes.Buffer
	fs := quietFlags(&out)
	fs.Usage = func() { io.WriteString(fs.Output(), "about the command\n") }
	if err := settings.Load(fs, &schema{}, nil, []string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v, want flag.ErrHelp", err)
	}
	for _, want := range []string{"about the command\n", "FLAG", "--wait", "T_WAIT", "1s", "how long", `""`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, out.String())
		}
	}
}

func TestSplice(t *testing.T) {
	begin, end := settings.Markers("serve")
	other, _ := settings.Markers("probe")
	cases := []struct {
		name, doc, want, err string
	}{
		{"replaces", "a\n" + begin + "\nold\n" + end + "\nb", "a\n" + begin + "\nnew\n" + end + "\nb", ""},
		{"only its own", other + "\nx\n" + begin + "\nold\n" + end, other + "\nx\n" + begin + "\nnew\n" + end, ""},
		{"no markers", "a\nb", "", "markers"},
		{"no end", begin + "\nold", "", "markers"},
		{"another command's", other + "\nold\n" + end, "", "markers"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := settings.Splice(tc.doc, "serve", "new\n")
			if got != tc.want || (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Splice = %q, %v; want %q, %q", got, err, tc.want, tc.err)
			}
		})
	}
}

// quietFlags returns a flag set that writes its messages to out, or nowhere.
func quietFlags(out *bytes.Buffer) *flag.FlagSet {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if out != nil {
		fs.SetOutput(out)
	}
	return fs
}
