package demo

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/slogate/slogate/enginesim"
	"github.com/slogate/slogate/gpu"
)

// The demo's GPUs. slogate reads GPU metrics from NVIDIA DCGM, and the demo has no GPU:
// simGPUs stands in for DCGM with readings MODELLED from the engine simulator, so that
// the GPU panels of the dashboards have something to show. They measure no hardware.
// The board is an imaginary 24 GiB, 300 W GPU:
//
//   - utilisation is the share of the time since the previous reading during which the
//     simulator's scheduler ran steps (at least one kernel running, as DCGM counts it);
//   - memory in use is the model's weights plus the KV-cache blocks in use;
//   - power is the idle draw plus utilisation times the range up to the maximum;
//   - temperature moves towards ambient plus a rise proportional to utilisation, with a
//     time constant of half a minute;
//   - the SM clock is fixed.

// The simulated board.
const (
	simGPUMemoryBytes = 24 << 30
	simGPUWeights     = 0.3 // share of the memory the model's weights hold
	simGPUKVPool      = 0.6 // share of the memory the KV cache holds when full
	simGPUIdleWatts   = 60.0
	simGPUMaxWatts    = 300.0
	simGPUAmbient     = 35.0 // °C at rest
	simGPUHeatRise    = 40.0 // °C above ambient at full utilisation, in the long run
	simGPUHeatTime    = 30 * time.Second
	simGPUSMClockHz   = 1.41e9
	// simGPUMinInterval is the shortest interval utilisation is measured over: readings
	// closer together (two scrapers at once) repeat the previous figures.
	simGPUMinInterval = 500 * time.Millisecond
)

// simGPUs is a gpu.Source of count simulated GPUs sharing one simulated engine
// (tensor parallelism: every GPU works on every step). Safe for concurrent use.
type simGPUs struct {
	stats  func() enginesim.Stats // the simulator's scheduler
	blocks int                    // KV-cache blocks of the profile
	speed  float64                // the simulator's Speed: modelled time per real time
	count  int
	now    func() time.Time

	mu   sync.Mutex
	at   time.Time     // the previous reading; zero before the first
	busy time.Duration // the scheduler's busy time then, in modelled time
	util float64
	temp float64
}

var _ gpu.Source = (*simGPUs)(nil)

// newSimGPUs returns count GPUs modelled from sim, which runs cfg.
func newSimGPUs(sim *enginesim.Server, cfg enginesim.Config, count int) *simGPUs {
	return &simGPUs{stats: sim.Stats, blocks: cfg.Profile.NumBlocks, speed: cfg.Speed, count: count, now: time.Now}
}

// Devices returns the current reading of every simulated GPU; it never fails.
func (g *simGPUs) Devices(context.Context) ([]gpu.Sample, error) {
	st := g.stats()
	util, temp := g.advance(g.now(), st.BusyTime)
	kv := 0.0
	if g.blocks > 0 {
		kv = min(max(float64(st.UsedBlocks)/float64(g.blocks), 0), 1)
	}
	out := make([]gpu.Sample, g.count)
	for i := range out {
		s := gpu.NewSample(i, fmt.Sprintf("GPU-simulated-%d", i))
		s.Utilization = util
		s.MemoryTotalBytes = simGPUMemoryBytes
		s.MemoryUsedBytes = math.Round(simGPUMemoryBytes * (simGPUWeights + simGPUKVPool*kv))
		s.PowerWatts = simGPUIdleWatts + util*(simGPUMaxWatts-simGPUIdleWatts)
		s.TemperatureCelsius = temp
		s.SMClockHertz = simGPUSMClockHz
		out[i] = s
	}
	return out, nil
}

// advance measures utilisation from the scheduler's busy time since the previous
// reading, moves the temperature on, and returns both. The first reading finds the
// board idle and at ambient temperature.
func (g *simGPUs) advance(now time.Time, busy time.Duration) (util, temp float64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.at.IsZero() {
		g.at, g.busy, g.util, g.temp = now, busy, 0, simGPUAmbient
		return g.util, g.temp
	}
	dt := now.Sub(g.at)
	if dt < simGPUMinInterval {
		return g.util, g.temp
	}
	speed := g.speed
	if !(speed > 0) {
		speed = 1
	}
	g.util = min(max(float64(busy-g.busy)/speed/float64(dt), 0), 1)
	target := simGPUAmbient + g.util*simGPUHeatRise
	g.temp = target + (g.temp-target)*math.Exp(-dt.Seconds()/simGPUHeatTime.Seconds())
	g.at, g.busy = now, busy
	return g.util, g.temp
}
