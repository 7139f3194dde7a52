package demo

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/slogate/slogate/enginesim"
)

// TestSimGPUs: the simulated GPUs' readings follow the simulator's scheduler as the
// model in gpus.go says, reading by reading.
func TestSimGPUs(t *testing.T) {
	type reading struct {
		after     time.Duration // since the previous reading
		busy      time.Duration // the scheduler's busy time added since, modelled
		used      int           // KV blocks in use, of 100
		util, mem float64       // want
		watts     float64
	}
	const gib = 1 << 30
	first := reading{util: 0, mem: 0.3 * 24 * gib, watts: 60} // idle, at ambient temperature
	cases := []struct {
		name     string
		speed    float64
		readings []reading
		hot      bool // the temperature rose above ambient by the end
	}{
		{name: "idle", readings: []reading{
			first,
			{after: time.Second, util: 0, mem: 0.3 * 24 * gib, watts: 60},
		}},
		{name: "half busy, half the cache", readings: []reading{
			first,
			{after: 2 * time.Second, busy: time.Second, used: 50, util: 0.5, mem: 0.6 * 24 * gib, watts: 180},
		}, hot: true},
		{name: "busy at twice the speed", speed: 2, readings: []reading{
			first,
			{after: time.Second, busy: 2 * time.Second, used: 100, util: 1, mem: 0.9 * 24 * gib, watts: 300},
		}, hot: true},
		{name: "a reading too soon repeats the last", readings: []reading{
			first,
			{after: time.Second, busy: time.Second, util: 1, mem: 0.3 * 24 * gib, watts: 300},
			{after: time.Millisecond, util: 1, mem: 0.3 * 24 * gib, watts: 300},
		}, hot: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(1e9, 0)
			var st enginesim.Stats
			g := &simGPUs{stats: func() enginesim.Stats { return st }, blocks: 100, speed: tc.speed, count: 2, now: func() time.Time { return now }}
			var temp float64
			for i, r := range tc.readings {
				now = now.Add(r.after)
				st.BusyTime += r.busy
				st.UsedBlocks = r.used
				gpus, err := g.Devices(context.Background())
				if err != nil || len(gpus) != 2 {
					t.Fatalf("reading %d: %d GPUs, %v; want 2", i, len(gpus), err)
				}
				s := gpus[1]
				if s.Index != 1 || s.UUID == gpus[0].UUID || s.SMClockHertz != simGPUSMClockHz || s.MemoryTotalBytes != 24*gib {
					t.Errorf("reading %d: GPU %+v, want index 1, its own UUID, the fixed clock and 24 GiB", i, s)
				}
				if !near(s.Utilization, r.util) || !near(s.MemoryUsedBytes, r.mem) || !near(s.PowerWatts, r.watts) {
					t.Errorf("reading %d: utilisation %v, memory %v, power %v W; want %v, %v, %v W",
						i, s.Utilization, s.MemoryUsedBytes, s.PowerWatts, r.util, r.mem, r.watts)
				}
				temp = s.TemperatureCelsius
			}
			if hot := temp > simGPUAmbient; hot != tc.hot || temp > simGPUAmbient+simGPUHeatRise {
				t.Errorf("temperature %v °C; want above ambient %v: %v, and at most %v", temp, simGPUAmbient, tc.hot, simGPUAmbient+simGPUHeatRise)
			}
		})
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }
