package admission

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/slogate/slogate/measure"
)

func TestParseConfigExample(t *testing.T) {
	cfg, err := LoadConfig(filepath.Join("testdata", "tiers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := []TierConfig{
		{Name: "short", MaxInputTokens: 2048, Rate: 20, Burst: 40, MaxInFlight: 64, MinInFlight: 8, MaxQueue: 128,
			MaxQueueWait: measure.Duration(2 * time.Second), SLO: measure.NewSLO(time.Second, 50*time.Millisecond)},
		{Name: "medium", MaxInputTokens: 8192, Rate: 1.4, Burst: 4, MaxInFlight: 32, MaxQueue: 64,
			MaxQueueWait: measure.Duration(4 * time.Second), SLO: measure.SLO{TTFT: measure.Duration(3500 * time.Millisecond)}},
		{Name: "long", MaxInputTokens: 32768, MaxInFlight: 8, MaxQueue: 16, MaxQueueWait: measure.Duration(10 * time.Second), MaxPrefillTokens: 120000},
		{Name: "xlong", MaxInFlight: 2, MaxQueue: 4, MaxQueueWait: measure.Duration(30 * time.Second)},
	}
	if !reflect.DeepEqual(cfg.Tiers, want) {
		t.Fatalf("tiers\n got %+v\nwant %+v", cfg.Tiers, want)
	}
	wantFB := Feedback{Interval: measure.Duration(2 * time.Second), Window: measure.Duration(30 * time.Second), MinSamples: 20, Backoff: 0.9, Increase: 1}
	if cfg.Feedback != wantFB {
		t.Fatalf("feedback %+v", cfg.Feedback)
	}

	// The calibration block is kept as written and survives writing the file back.
	if cfg.Calibration.Kind != yaml.MappingNode {
		t.Fatalf("calibration kind %v", cfg.Calibration.Kind)
	}
	var cal struct {
		Engine string
		Scan   []struct{ Factor float64 }
	}
	if err := cfg.Calibration.Decode(&cal); err != nil || cal.Engine != "sglang" || len(cal.Scan) != 3 || cal.Scan[2].Factor != 1.1 {
		t.Fatalf("calibration %+v, %v", cal, err)
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	again, err := ParseConfig(out)
	if err != nil {
		t.Fatalf("re-parsing:\n%s\n%v", out, err)
	}
	if !reflect.DeepEqual(again.Tiers, cfg.Tiers) || again.Feedback != cfg.Feedback {
		t.Fatalf("round trip changed the configuration:\n%s", out)
	}
	if !strings.Contains(string(out), "rate: 1.7499") || !strings.Contains(string(out), "26.85s") {
		t.Fatalf("calibration lost in:\n%s", out)
	}
}

func TestParseConfigDurations(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"2s", 2 * time.Second}, {"100ms", 100 * time.Millisecond}, {"1m30s", 90 * time.Second},
		{`"250ms"`, 250 * time.Millisecond}, {"1.5s", 1500 * time.Millisecond}, {"0", 0},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			cfg, err := ParseConfig([]byte("tiers:\n- name: a\n  max_in_flight: 1\n  slo: {ttft: " + tt.in + "}\n"))
			if err != nil {
				t.Fatal(err)
			}
			if got := time.Duration(cfg.Tiers[0].SLO.TTFT); got != tt.want {
				t.Fatalf("ttft %v, want %v", got, tt.want)
			}
		})
	}
}

func TestParseConfigErrors(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{name: "empty file", in: "", want: "EOF"},
		{name: "not YAML", in: "tiers: [", want: "yaml"},
		{name: "unknown top-level field", in: "tiers: [{name: a, max_in_flight: 1}]\nextra: 1\n", want: "field extra not found"},
		{name: "unknown tier field", in: "tiers: [{name: a, max_in_flight: 1, max_inflight: 2}]\n", want: "field max_inflight not found"},
		{name: "unknown SLO field", in: "tiers: [{name: a, max_in_flight: 1, slo: {ttfb: 1s}}]\n", want: "field ttfb not found"},
		{name: "unknown feedback field", in: "tiers: [{name: a, max_in_flight: 1}]\nfeedback: {period: 1s}\n", want: "field period not found"},
		{name: "duration without unit", in: "tiers: [{name: a, max_in_flight: 1, max_queue: 1, max_queue_wait: 5}]\n", want: "not a duration"},
		{name: "duration as a mapping", in: "tiers: [{name: a, max_in_flight: 1, slo: {ttft: {s: 1}}}]\n", want: "not a duration"},
		{name: "duplicate key", in: "tiers: [{name: a, name: b, max_in_flight: 1}]\n", want: "already defined"},
		{name: "wrong type", in: "tiers: [{name: a, max_in_flight: many}]\n", want: "cannot unmarshal"},
		{name: "valid YAML, invalid config", in: "tiers: []\n", want: "want 1 to 16 tiers"},
		{name: "NaN backoff", in: "tiers: [{name: a, max_in_flight: 1}]\nfeedback: {backoff: .nan}\n", want: "backoff"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tt.in))
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want ErrInvalidConfig mentioning %q", err, tt.want)
			}
		})
	}
	if _, err := LoadConfig(filepath.Join(t.TempDir(), "missing.yaml")); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("LoadConfig(missing) = %v", err)
	}
}

func TestValidate(t *testing.T) {
	valid := func() Config {
		return Config{Tiers: []TierConfig{
			{Name: "a", MaxInputTokens: 100, MaxInFlight: 4, MaxQueue: 2, MaxQueueWait: measure.Duration(time.Second)},
			{Name: "b", MaxInFlight: 2},
		}}
	}
	tier := func(i int, edit func(*TierConfig)) func(*Config) { return func(c *Config) { edit(&c.Tiers[i]) } }
	fb := func(edit func(*Feedback)) func(*Config) { return func(c *Config) { edit(&c.Feedback) } }
	tests := []struct {
		name string
		edit func(*Config)
		want string // "" valid
	}{
		{name: "valid", edit: func(*Config) {}},
		{name: "one unbounded tier", edit: func(c *Config) { c.Tiers = c.Tiers[1:] }},
		{name: "a bounded last tier", edit: tier(1, func(t *TierConfig) { t.MaxInputTokens = 200 })},
		{name: "sixteen tiers", edit: func(c *Config) { c.Tiers = manyTiers(16) }},
		{name: "rate 0 with a burst", edit: tier(0, func(t *TierConfig) { t.Burst = 5 })},
		{name: "wait without a queue", edit: tier(1, func(t *TierConfig) { t.MaxQueueWait = measure.Duration(time.Second) })},
		{name: "min equal to max", edit: tier(0, func(t *TierConfig) { t.MinInFlight = 4 })},
		{name: "increase +0 and backoff 0 (defaults)", edit: fb(func(f *Feedback) { f.Backoff, f.Increase = 0, 0 })},

		{name: "no tiers", edit: func(c *Config) { c.Tiers = nil }, want: "want 1 to 16 tiers, got 0"},
		{name: "seventeen tiers", edit: func(c *Config) { c.Tiers = manyTiers(17) }, want: "got 17"},
		{name: "no name", edit: tier(0, func(t *TierConfig) { t.Name = "" }), want: "name of 1-32"},
		{name: "long name", edit: tier(0, func(t *TierConfig) { t.Name = strings.Repeat("n", 33) }), want: "name of 1-32"},
		{name: "duplicate name", edit: tier(1, func(t *TierConfig) { t.Name = "a" }), want: "duplicate"},
		{name: "unbounded tier before the last", edit: tier(0, func(t *TierConfig) { t.MaxInputTokens = 0 }), want: "must grow"},
		{name: "negative bound", edit: tier(0, func(t *TierConfig) { t.MaxInputTokens = -1 }), want: "must grow"},
		{name: "bounds not growing", edit: func(c *Config) {
			c.Tiers = append([]TierConfig{{Name: "z", MaxInputTokens: 100, MaxInFlight: 1}}, c.Tiers...)
		}, want: "must grow"},
		{name: "last bound not above the previous", edit: tier(1, func(t *TierConfig) { t.MaxInputTokens = 100 }), want: "above the previous"},
		{name: "negative rate", edit: tier(0, func(t *TierConfig) { t.Rate, t.Burst = -1, 1 }), want: "rate must be >= 0"},
		{name: "NaN rate", edit: tier(0, func(t *TierConfig) { t.Rate, t.Burst = math.NaN(), 1 }), want: "rate must be >= 0"},
		{name: "infinite rate", edit: tier(0, func(t *TierConfig) { t.Rate, t.Burst = math.Inf(1), 1 }), want: "rate must be >= 0"},
		{name: "rate without burst", edit: tier(0, func(t *TierConfig) { t.Rate = 5 }), want: "burst >= 1"},
		{name: "negative burst", edit: tier(0, func(t *TierConfig) { t.Burst = -1 }), want: "burst >= 1"},
		{name: "no in-flight cap", edit: tier(0, func(t *TierConfig) { t.MaxInFlight = 0 }), want: "min_in_flight <= max_in_flight"},
		{name: "negative min in flight", edit: tier(0, func(t *TierConfig) { t.MinInFlight = -1 }), want: "min_in_flight <= max_in_flight"},
		{name: "min above max", edit: tier(0, func(t *TierConfig) { t.MinInFlight = 5 }), want: "min_in_flight <= max_in_flight"},
		{name: "negative queue", edit: tier(0, func(t *TierConfig) { t.MaxQueue = -1 }), want: "must not be negative"},
		{name: "negative wait", edit: tier(0, func(t *TierConfig) { t.MaxQueueWait = -1 }), want: "must not be negative"},
		{name: "negative prefill bound", edit: tier(0, func(t *TierConfig) { t.MaxPrefillTokens = -1 }), want: "max_prefill_tokens must not be negative"},
		{name: "negative TTFT SLO", edit: tier(0, func(t *TierConfig) { t.SLO.TTFT = -1 }), want: "SLOs"},
		{name: "negative TPOT SLO", edit: tier(1, func(t *TierConfig) { t.SLO.TPOT = -1 }), want: "SLOs"},
		{name: "negative interval", edit: fb(func(f *Feedback) { f.Interval = -1 }), want: "feedback"},
		{name: "negative window", edit: fb(func(f *Feedback) { f.Window = -1 }), want: "feedback"},
		{name: "negative min samples", edit: fb(func(f *Feedback) { f.MinSamples = -1 }), want: "feedback"},
		{name: "negative increase", edit: fb(func(f *Feedback) { f.Increase = -1 }), want: "feedback"},
		{name: "NaN increase", edit: fb(func(f *Feedback) { f.Increase = math.NaN() }), want: "feedback"},
		{name: "infinite increase", edit: fb(func(f *Feedback) { f.Increase = math.Inf(1) }), want: "feedback"},
		{name: "negative backoff", edit: fb(func(f *Feedback) { f.Backoff = -0.5 }), want: "feedback"},
		{name: "backoff 1", edit: fb(func(f *Feedback) { f.Backoff = 1 }), want: "feedback"},
		{name: "NaN backoff", edit: fb(func(f *Feedback) { f.Backoff = math.NaN() }), want: "feedback"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid()
			tt.edit(&c)
			err := c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate = %v, want nil", err)
			case tt.want != "" && (!errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Validate = %v, want ErrInvalidConfig mentioning %q", err, tt.want)
			}
		})
	}
}

func manyTiers(n int) []TierConfig {
	ts := make([]TierConfig, n)
	for i := range ts {
		ts[i] = TierConfig{Name: string(rune('a' + i)), MaxInputTokens: (i + 1) * 10, MaxInFlight: 1}
	}
	ts[n-1].MaxInputTokens = 0
	return ts
}

func TestDefaultConfig(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	var bounds []int
	for _, tc := range c.Tiers {
		bounds = append(bounds, tc.MaxInputTokens)
	}
	if !reflect.DeepEqual(bounds, []int{2048, 8192, 32768, 0}) {
		t.Fatalf("bounds %v, want <=2K, <=8K, <=32K, above", bounds)
	}
	if _, err := New(c, Options{}); err != nil {
		t.Fatal(err)
	}
}

func TestWithDefaults(t *testing.T) {
	sidecar := measure.NewSLO(2*time.Second, 100*time.Millisecond)
	c := Config{
		Tiers: []TierConfig{
			{Name: "none", MaxInputTokens: 10, MaxInFlight: 4},
			{Name: "ttft only", MaxInputTokens: 20, MaxInFlight: 4, MinInFlight: 3, SLO: measure.SLO{TTFT: measure.Duration(time.Second)}},
			{Name: "both", MaxInFlight: 4, SLO: measure.NewSLO(5*time.Second, time.Second)},
		},
		Feedback: Feedback{MinSamples: 7, Backoff: 0.5},
	}
	d := c.withDefaults(sidecar)
	wantSLO := []measure.SLO{sidecar, {TTFT: measure.Duration(time.Second), TPOT: sidecar.TPOT}, c.Tiers[2].SLO}
	wantMin := []int{1, 3, 1}
	for i, tc := range d.Tiers {
		if tc.SLO != wantSLO[i] || tc.MinInFlight != wantMin[i] {
			t.Errorf("tier %q: SLO %+v min %d, want %+v min %d", tc.Name, tc.SLO, tc.MinInFlight, wantSLO[i], wantMin[i])
		}
	}
	wantFB := Feedback{Interval: measure.Duration(2 * time.Second), Window: measure.Duration(60 * time.Second), MinSamples: 7, Backoff: 0.5, Increase: 1, Target: 0.9}
	if d.Feedback != wantFB {
		t.Errorf("feedback %+v, want %+v", d.Feedback, wantFB)
	}
	if c.Tiers[0].SLO != (measure.SLO{}) || c.Tiers[0].MinInFlight != 0 || c.Feedback.Interval != 0 {
		t.Errorf("withDefaults changed its receiver's tiers: %+v", c)
	}
	if err := d.Validate(); err != nil {
		t.Errorf("defaults invalid: %v", err)
	}
}

// FuzzParseConfig: ParseConfig never panics; what it accepts is valid and survives being
// written back and parsed again.
func FuzzParseConfig(f *testing.F) {
	for _, name := range []string{"tiers.yaml", "minimal.yaml"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	def, err := yaml.Marshal(DefaultConfig())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(def)
	for _, s := range []string{
		"", "tiers:", "tiers: [{name: a, max_in_flight: 1}]\nfeedback: {backoff: .nan}\n",
		"tiers: [{name: a, max_in_flight: 1, rate: .inf, burst: 1}]",
		"tiers:\n- &t {name: a, max_input_tokens: 5, max_in_flight: 1}\n- {<<: *t, name: b, max_input_tokens: 0}\ncalibration: *t\n",
		"tiers: [{name: a, max_in_flight: 1, max_queue: 1, max_queue_wait: -1s}]",
		"tiers: [{name: \"\\u00e9\\t\", max_in_flight: 1, slo: {ttft: 1h2m3.5s, tpot: 1ns}}]",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseConfig(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("error not wrapping ErrInvalidConfig: %v", err)
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("ParseConfig accepted an invalid config: %v", err)
		}
		// The calibration block is opaque and may refer to anchors elsewhere in the file;
		// the settings are what must survive.
		cfg.Calibration = yaml.Node{}
		out, err := yaml.Marshal(cfg)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		again, err := ParseConfig(out)
		if err != nil {
			t.Fatalf("written back:\n%s\ndoes not parse: %v", out, err)
		}
		again.Calibration = yaml.Node{}
		if !reflect.DeepEqual(again, cfg) {
			t.Fatalf("round trip changed the configuration:\n%+v\n%+v", cfg, again)
		}
		if _, err := New(cfg, Options{}); err != nil {
			t.Fatalf("New rejects a parsed config: %v", err)
		}
	})
}

// A queue without a wait waits half the tier's TTFT SLO: a request that waited the
// longest can still meet the SLO.
func TestQueueWaitDefaultsToHalfTheTTFT(t *testing.T) {
	c := Config{Tiers: []TierConfig{{Name: "a", MaxInputTokens: 10, MaxInFlight: 1, MaxQueue: 4}, {Name: "b", MaxInFlight: 1, MaxQueue: 4, SLO: measure.SLO{TTFT: measure.Duration(8 * time.Second)}}}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	d := c.withDefaults(measure.NewSLO(2*time.Second, 100*time.Millisecond))
	if d.Tiers[0].MaxQueueWait != measure.Duration(time.Second) || d.Tiers[1].MaxQueueWait != measure.Duration(4*time.Second) {
		t.Errorf("waits %v and %v, want 1s and 4s", time.Duration(d.Tiers[0].MaxQueueWait), time.Duration(d.Tiers[1].MaxQueueWait))
	}
}
