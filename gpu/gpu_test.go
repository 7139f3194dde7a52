package gpu

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"go.uber.org/goleak"

	"github.com/slogate/slogate/clock"
)

// fakeGPUs is a Source that returns fixed samples or a fixed error.
type fakeGPUs struct {
	samples []Sample
	err     error
}

func (f fakeGPUs) Devices(context.Context) ([]Sample, error) { return f.samples, f.err }

// gpuSample returns a sample with every measurement known.
func gpuSample(index int, uuid string, util, used, total, watts, celsius, hertz float64) Sample {
	return Sample{Index: index, UUID: uuid, Utilization: util, MemoryUsedBytes: used,
		MemoryTotalBytes: total, PowerWatts: watts, TemperatureCelsius: celsius, SMClockHertz: hertz}
}

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// gatherGPU registers c on a fresh registry, checks it with the linter and returns every
// gauge it exports, keyed by `name{k="v",...}` (labels in the registry's order, which is
// sorted).
func gatherGPU(t *testing.T, c prometheus.Collector) map[string]float64 {
	t.Helper()
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			key := f.GetName()
			if len(labels) > 0 {
				key += "{" + strings.Join(labels, ",") + "}"
			}
			out[key] = m.GetGauge().GetValue()
		}
	}
	return out
}

func TestGPUCollector(t *testing.T) {
	const gib = 1 << 30
	partial := NewSample(3, "GPU-c")
	partial.MemoryTotalBytes, partial.TemperatureCelsius = 24*gib, 41
	tests := []struct {
		name string
		src  Source
		want map[string]float64
	}{{
		name: "two GPUs",
		src: fakeGPUs{samples: []Sample{
			gpuSample(0, "GPU-a", 0.87, 70*gib, 80*gib, 612.5, 71, 1.98e9),
			gpuSample(1, "GPU-b", 0, 0.5*gib, 80*gib, 71.25, 33, 345e6),
		}},
		want: map[string]float64{
			`slogate_gpu_collector_up`:                              1,
			`slogate_gpu_utilization_ratio{gpu="0",uuid="GPU-a"}`:   0.87,
			`slogate_gpu_memory_used_bytes{gpu="0",uuid="GPU-a"}`:   70 * gib,
			`slogate_gpu_memory_total_bytes{gpu="0",uuid="GPU-a"}`:  80 * gib,
			`slogate_gpu_power_watts{gpu="0",uuid="GPU-a"}`:         612.5,
			`slogate_gpu_temperature_celsius{gpu="0",uuid="GPU-a"}`: 71,
			`slogate_gpu_sm_clock_hertz{gpu="0",uuid="GPU-a"}`:      1.98e9,
			`slogate_gpu_utilization_ratio{gpu="1",uuid="GPU-b"}`:   0,
			`slogate_gpu_memory_used_bytes{gpu="1",uuid="GPU-b"}`:   0.5 * gib,
			`slogate_gpu_memory_total_bytes{gpu="1",uuid="GPU-b"}`:  80 * gib,
			`slogate_gpu_power_watts{gpu="1",uuid="GPU-b"}`:         71.25,
			`slogate_gpu_temperature_celsius{gpu="1",uuid="GPU-b"}`: 33,
			`slogate_gpu_sm_clock_hertz{gpu="1",uuid="GPU-b"}`:      345e6,
		},
	}, {
		name: "unknown measurements left out",
		src:  fakeGPUs{samples: []Sample{partial}},
		want: map[string]float64{
			`slogate_gpu_collector_up`:                              1,
			`slogate_gpu_memory_total_bytes{gpu="3",uuid="GPU-c"}`:  24 * gib,
			`slogate_gpu_temperature_celsius{gpu="3",uuid="GPU-c"}`: 41,
		},
	}, {
		name: "a second sample of the same GPU is dropped",
		src: fakeGPUs{samples: []Sample{
			{Index: 0, UUID: "GPU-a", Utilization: 0.5, MemoryUsedBytes: math.NaN(), MemoryTotalBytes: math.NaN(),
				PowerWatts: math.NaN(), TemperatureCelsius: math.NaN(), SMClockHertz: math.Inf(1)},
			gpuSample(0, "GPU-a", 0.9, 1, 2, 3, 4, 5),
		}},
		want: map[string]float64{
			`slogate_gpu_collector_up`:                            1,
			`slogate_gpu_utilization_ratio{gpu="0",uuid="GPU-a"}`: 0.5,
		},
	}, {
		name: "no GPU in a successful reading",
		src:  fakeGPUs{},
		want: map[string]float64{`slogate_gpu_collector_up`: 1},
	}, {
		name: "source error: up 0, no per-GPU series",
		src: fakeGPUs{
			samples: []Sample{gpuSample(0, "GPU-a", 0.87, 70*gib, 80*gib, 612.5, 71, 1.98e9)},
			err:     errors.New("Host engine connection invalid/disconnected"),
		},
		want: map[string]float64{`slogate_gpu_collector_up`: 0},
	}, {
		name: "DCGM unavailable: up 0 only",
		src:  nil,
		want: map[string]float64{`slogate_gpu_collector_up`: 0},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := gatherGPU(t, NewCollector(tt.src, nil))
			if !maps.Equal(got, tt.want) {
				t.Errorf("exported\n%v\nwant\n%v", got, tt.want)
			}
		})
	}
}

// Exact exposition, HELP and TYPE included, of a one-GPU reading.
func TestGPUCollectorExposition(t *testing.T) {
	src := fakeGPUs{samples: []Sample{gpuSample(0, "GPU-a", 0.25, 1<<30, 2<<30, 300, 60, 1.5e9)}}
	want := `# HELP slogate_gpu_collector_up 1 if slogate's last reading of the GPUs from DCGM succeeded, 0 if DCGM is unavailable or the reading failed.
# TYPE slogate_gpu_collector_up gauge
slogate_gpu_collector_up 1
# HELP slogate_gpu_utilization_ratio Fraction of the last sample period during which one or more kernels ran on the GPU, 0-1 (DCGM_FI_DEV_GPU_UTIL / 100).
# TYPE slogate_gpu_utilization_ratio gauge
slogate_gpu_utilization_ratio{gpu="0",uuid="GPU-a"} 0.25
# HELP slogate_gpu_memory_used_bytes Framebuffer memory in use on the GPU (DCGM_FI_DEV_FB_USED).
# TYPE slogate_gpu_memory_used_bytes gauge
slogate_gpu_memory_used_bytes{gpu="0",uuid="GPU-a"} 1.073741824e+09
# HELP slogate_gpu_memory_total_bytes Total framebuffer memory of the GPU (DCGM_FI_DEV_FB_TOTAL).
# TYPE slogate_gpu_memory_total_bytes gauge
slogate_gpu_memory_total_bytes{gpu="0",uuid="GPU-a"} 2.147483648e+09
# HELP slogate_gpu_power_watts Power drawn by the GPU board (DCGM_FI_DEV_POWER_USAGE).
# TYPE slogate_gpu_power_watts gauge
slogate_gpu_power_watts{gpu="0",uuid="GPU-a"} 300
# HELP slogate_gpu_temperature_celsius GPU temperature (DCGM_FI_DEV_GPU_TEMP).
# TYPE slogate_gpu_temperature_celsius gauge
slogate_gpu_temperature_celsius{gpu="0",uuid="GPU-a"} 60
# HELP slogate_gpu_sm_clock_hertz Current SM clock of the GPU (DCGM_FI_DEV_SM_CLOCK).
# TYPE slogate_gpu_sm_clock_hertz gauge
slogate_gpu_sm_clock_hertz{gpu="0",uuid="GPU-a"} 1.5e+09
`
	if err := testutil.CollectAndCompare(NewCollector(src, nil), strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

// flakyGPUs is a Source whose readings fail while err is set.
type flakyGPUs struct{ err error }

func (f *flakyGPUs) Devices(context.Context) ([]Sample, error) {
	if f.err != nil {
		return nil, f.err
	}
	return []Sample{NewSample(0, "GPU-a")}, nil
}

func TestGPUCollectorLogsChangesNotScrapes(t *testing.T) {
	var buf bytes.Buffer
	src := &flakyGPUs{}
	c := NewCollector(src, slog.New(slog.NewTextHandler(&buf, nil)))
	fail := errors.New("connection lost")
	for _, err := range []error{nil, fail, fail, fail, nil, nil, fail} {
		src.err = err
		testutil.CollectAndCount(c)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[0], "connection lost") ||
		!strings.Contains(lines[1], "level=INFO") || !strings.Contains(lines[2], "level=WARN") {
		t.Errorf("logged %d lines, want a warning, a recovery and a warning:\n%s", len(lines), buf.String())
	}
}

func TestGPUSampleFromDCGMUnits(t *testing.T) {
	tests := []struct {
		name string
		m    dcgmMeasure
		x    float64
		get  func(Sample) float64
		want float64
	}{
		{"utilisation percent to ratio", dcgmUtilPercent, 87, func(s Sample) float64 { return s.Utilization }, 0.87},
		{"memory used MiB to bytes", dcgmMemUsedMiB, 81559, func(s Sample) float64 { return s.MemoryUsedBytes }, 81559 * 1024 * 1024},
		{"memory total MiB to bytes", dcgmMemTotalMiB, 81920, func(s Sample) float64 { return s.MemoryTotalBytes }, 80 << 30},
		{"power in watts", dcgmPowerWatts, 612.5, func(s Sample) float64 { return s.PowerWatts }, 612.5},
		{"temperature in celsius", dcgmTempCelsius, 71, func(s Sample) float64 { return s.TemperatureCelsius }, 71},
		{"SM clock MHz to hertz", dcgmSMClockMHz, 1980, func(s Sample) float64 { return s.SMClockHertz }, 1.98e9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewSample(0, "")
			s.setDCGM(tt.m, tt.x)
			if got := tt.get(s); math.Abs(got-tt.want) > 1e-9*math.Abs(tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestValidateDCGM(t *testing.T) {
	tests := []struct {
		setting string
		ok      bool
	}{
		{DCGMOff, true},
		{DCGMEmbedded, true},
		{"localhost:5555", true},
		{"10.0.0.7:5555", true},
		{"[::1]:5555", true},
		{"tcp://10.0.0.7:5555", true},
		{"unix:///run/nvidia/dcgm.sock", true},
		{"", false},
		{"Embedded", false},
		{"localhost", false},
		{":5555", false},
		{"localhost:0", false},
		{"localhost:http", false},
		{"tcp://", false},
		{"http://localhost:5555", false},
	}
	for _, tt := range tests {
		t.Run(tt.setting, func(t *testing.T) {
			if err := ValidateDCGM(tt.setting); (err == nil) != tt.ok {
				t.Errorf("ValidateDCGM(%q) = %v, want ok %v", tt.setting, err, tt.ok)
			}
		})
	}
}

// On this machine (no libdcgm, no GPU; or a build without cgo) opening DCGM must fail
// with an error, not a panic or a crash. Where DCGM is installed the test is skipped.
func TestOpenDCGMWithoutDCGM(t *testing.T) {
	for _, setting := range []string{DCGMEmbedded, "localhost:5555", "unix:///run/nvidia/dcgm.sock"} {
		t.Run(setting, func(t *testing.T) {
			src, closer, err := OpenDCGM(setting)
			if err == nil {
				closer.Close()
				t.Skip("DCGM is installed here")
			}
			if !errors.Is(err, ErrDCGMUnavailable) || src != nil || closer != nil {
				t.Errorf("OpenDCGM(%q) = %v, %v, %v; want nil, nil and an error wrapping ErrDCGMUnavailable", setting, src, closer, err)
			}
		})
	}
	if _, _, err := OpenDCGM(DCGMOff); err == nil || errors.Is(err, ErrDCGMUnavailable) {
		t.Errorf("OpenDCGM(off) = %v, want an invalid-setting error", err)
	}
}

func TestNewDCGMCollector(t *testing.T) {
	if _, closer, err := OpenDCGM(DCGMEmbedded); err == nil {
		closer.Close()
		t.Skip("DCGM is installed here")
	}
	tests := []struct {
		name    string
		setting string
		want    map[string]float64
		logs    int
	}{
		{"off exports nothing", DCGMOff, map[string]float64{}, 0},
		{"embedded without DCGM", DCGMEmbedded, map[string]float64{`slogate_gpu_collector_up`: 0}, 1},
		{"standalone without DCGM", "localhost:5555", map[string]float64{`slogate_gpu_collector_up`: 0}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			c, closer, err := NewDCGMCollector(tt.setting, slog.New(slog.NewTextHandler(&buf, nil)))
			if err != nil {
				t.Fatal(err)
			}
			defer closer.Close()
			for range 3 { // scrapes do not log
				if got := gatherGPU(t, c); !maps.Equal(got, tt.want) {
					t.Errorf("exported %v, want %v", got, tt.want)
				}
			}
			if n := strings.Count(buf.String(), "\n"); n != tt.logs {
				t.Errorf("logged %d lines, want %d:\n%s", n, tt.logs, buf.String())
			}
			if closer.Close() != nil || closer.Close() != nil {
				t.Error("Close failed")
			}
		})
	}
	if _, _, err := NewDCGMCollector("gpu0", nil); err == nil {
		t.Error("NewDCGMCollector accepted an invalid setting")
	}
}

// fakeDial is a connection opener for redialSource: each open fails with the next error
// of openErrs (nil: succeeds, also once they run out); readings fail while readErr is set.
type fakeDial struct {
	openErrs []error
	readErr  error
	opens    int
	closes   int
}

func (d *fakeDial) open() (Source, io.Closer, error) {
	d.opens++
	if len(d.openErrs) > 0 {
		err := d.openErrs[0]
		d.openErrs = d.openErrs[1:]
		if err != nil {
			return nil, nil, err
		}
	}
	return d, d, nil
}

func (d *fakeDial) Devices(context.Context) ([]Sample, error) {
	if d.readErr != nil {
		return nil, d.readErr
	}
	return []Sample{NewSample(0, "GPU-a")}, nil
}

func (d *fakeDial) Close() error { d.closes++; return nil }

func TestRedialSource(t *testing.T) {
	refused := errors.New("connection refused")
	type step struct {
		after   time.Duration // clock advance before the reading
		readErr error         // the connection's reading fails with it
		wantErr bool
		opens   int // total opens after the step
		closes  int // total closes after the step
	}
	tests := []struct {
		name     string
		openErrs []error
		steps    []step
	}{{
		name: "connects at the first reading and keeps the connection",
		steps: []step{
			{opens: 1}, {after: time.Minute, opens: 1},
		},
	}, {
		name:     "a failed open is retried after the interval, not before",
		openErrs: []error{refused, refused},
		steps: []step{
			{wantErr: true, opens: 1},
			{after: 10 * time.Second, wantErr: true, opens: 1},
			{after: 20 * time.Second, wantErr: true, opens: 2},
			{after: 29 * time.Second, wantErr: true, opens: 2},
			{after: time.Second, opens: 3},
		},
	}, {
		name:     "a failed reading drops the connection; the next reading redials at once",
		openErrs: []error{nil, nil, refused},
		steps: []step{
			{opens: 1},
			{readErr: refused, wantErr: true, opens: 1, closes: 1},
			{opens: 2, closes: 1},
			{readErr: refused, wantErr: true, opens: 2, closes: 2},
			{wantErr: true, opens: 3, closes: 2},
			{after: time.Second, wantErr: true, opens: 3, closes: 2},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewFake(time.Unix(1700000000, 0))
			d := &fakeDial{openErrs: tt.openErrs}
			r := &redialSource{open: d.open, clock: clk, retry: 30 * time.Second}
			for i, s := range tt.steps {
				clk.SetTime(clk.Now().Add(s.after))
				d.readErr = s.readErr
				_, err := r.Devices(context.Background())
				if (err != nil) != s.wantErr || d.opens != s.opens || d.closes != s.closes {
					t.Fatalf("step %d: err %v, opens %d, closes %d; want error %v, opens %d, closes %d",
						i, err, d.opens, d.closes, s.wantErr, s.opens, s.closes)
				}
			}
			closesBefore := d.closes
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Devices(context.Background()); !errors.Is(err, errClosed) {
				t.Errorf("reading after Close: %v, want errClosed", err)
			}
			if d.closes > closesBefore+1 {
				t.Errorf("Close closed %d connections", d.closes-closesBefore)
			}
		})
	}
}

func TestRecovered(t *testing.T) {
	sentinel := errors.New("init() needs to be called before shutdown()")
	tests := []struct {
		name string
		f    func() error
		want string // "" for no error
	}{
		{"success", func() error { return nil }, ""},
		{"error is wrapped", func() error { return sentinel }, "stopping DCGM: init() needs to be called before shutdown()"},
		{"panic becomes an error", func() error { panic("invalid mode") }, "stopping DCGM: panic: invalid mode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := recovered("stopping DCGM", tt.f)
			if (err == nil) != (tt.want == "") || (err != nil && err.Error() != tt.want) {
				t.Errorf("recovered = %v, want %q", err, tt.want)
			}
		})
	}
	if err := recovered("stopping DCGM", func() error { return sentinel }); !errors.Is(err, sentinel) {
		t.Errorf("%v does not wrap f's error", err)
	}
}
