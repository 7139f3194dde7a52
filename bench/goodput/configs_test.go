package main

import (
	"testing"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/measure"
)

func TestStaticCap(t *testing.T) {
	sec := func(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }
	cases := []struct {
		name     string
		rate     float64
		e2e, p95 time.Duration
		limit    int
		wait     time.Duration
	}{
		{"Little's law rounds up", 1.1, sec(8.5), sec(2.2), 10, sec(2.5)},
		{"an exact product is kept", 1, sec(9), sec(2), 9, sec(3)},
		{"the wait is at least half a second", 1, sec(9), sec(4.9), 9, sec(0.5)},
		{"and leaves half a second of the SLO", 1, sec(9), sec(0.1), 9, sec(4.5)},
		{"at least one in flight", 0.01, sec(1), sec(1), 1, sec(4)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			limit, wait := staticCap(tc.rate, tc.e2e, tc.p95, 5*time.Second)
			if limit != tc.limit || wait != tc.wait {
				t.Errorf("staticCap = %d, %v; want %d, %v", limit, wait, tc.limit, tc.wait)
			}
		})
	}
}

func TestConfigsAreValid(t *testing.T) {
	s := measure.NewSLO(5*time.Second, 100*time.Millisecond)
	for name, cfg := range map[string]admission.Config{
		"static":  staticConfig(10, 2500*time.Millisecond, s),
		"slogate": slogateConfig(s, admission.Feedback{}),
	} {
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	st := staticConfig(10, time.Second, s).Tiers[0]
	if st.MinInFlight != st.MaxInFlight || st.MaxInputTokens != 0 || st.Rate != 0 {
		t.Errorf("static tier %+v: want a fixed cap over every input length and no rate limit", st)
	}
	sl := slogateConfig(s, admission.Feedback{})
	for _, tier := range sl.Tiers {
		if tier.SLO != s || tier.MinInFlight != 1 {
			t.Errorf("tier %s: %+v", tier.Name, tier)
		}
		if tier.Name == "medium" && (tier.MaxInputTokens != 8192 || tier.MaxInFlight != 32) {
			t.Errorf("the 8K tier: %+v", tier)
		}
	}
}
