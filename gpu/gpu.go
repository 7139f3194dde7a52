package gpu

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slogate/slogate/clock"
)

// This file holds the GPU metrics: what a Source reports, the collector that exports it,
// and the setting that chooses where the readings come from. The DCGM source is in
// dcgm.go (cgo builds on Linux) and nodcgm.go (every other build).

// The values of the DCGM setting (SLOGATE_DCGM / --dcgm in cmd) other than an address.
const (
	DCGMOff      = "off"      // no GPU metrics at all, not even slogate_gpu_collector_up
	DCGMEmbedded = "embedded" // run DCGM's host engine inside slogate (needs libdcgm.so.4 and the GPUs)
)

// Sentinel errors of OpenDCGM.
var (
	// ErrDCGMUnavailable wraps every reason DCGM could not be opened: a build without cgo,
	// a missing libdcgm.so.4, a host engine that failed to start, no GPU.
	ErrDCGMUnavailable = errors.New("DCGM unavailable")
	// ErrNoGPU is returned (wrapped in ErrDCGMUnavailable) when DCGM sees no GPU.
	ErrNoGPU = errors.New("DCGM sees no GPU")
)

// Sample is one GPU's state as read at one collection, in base units. A measurement
// the source could not read (not supported by the GPU, not yet sampled) is NaN; the
// collector leaves it out rather than export it. NewSample returns a sample with
// every measurement unknown.
type Sample struct {
	Index              int    // the GPU's index (DCGM's GPU id), exported as label gpu
	UUID               string // exported as label uuid
	Utilization        float64
	MemoryUsedBytes    float64
	MemoryTotalBytes   float64
	PowerWatts         float64
	TemperatureCelsius float64
	SMClockHertz       float64
}

// NewSample returns the sample of GPU index with every measurement unknown (NaN).
func NewSample(index int, uuid string) Sample {
	nan := math.NaN()
	return Sample{Index: index, UUID: uuid, Utilization: nan, MemoryUsedBytes: nan,
		MemoryTotalBytes: nan, PowerWatts: nan, TemperatureCelsius: nan, SMClockHertz: nan}
}

// dcgmMeasure names a measurement as DCGM reports it, in DCGM's unit.
type dcgmMeasure int

const (
	dcgmUtilPercent dcgmMeasure = iota + 1 // GPU utilisation, 0-100
	dcgmMemUsedMiB                         // framebuffer used, MiB (DCGM's "MB")
	dcgmMemTotalMiB                        // framebuffer total, MiB
	dcgmPowerWatts                         // board power, W
	dcgmTempCelsius                        // GPU temperature, °C
	dcgmSMClockMHz                         // SM clock, MHz
)

// setDCGM stores x, measurement m in DCGM's unit, into s in base units.
func (s *Sample) setDCGM(m dcgmMeasure, x float64) {
	switch m {
	case dcgmUtilPercent:
		s.Utilization = x / 100
	case dcgmMemUsedMiB:
		s.MemoryUsedBytes = x * (1 << 20)
	case dcgmMemTotalMiB:
		s.MemoryTotalBytes = x * (1 << 20)
	case dcgmPowerWatts:
		s.PowerWatts = x
	case dcgmTempCelsius:
		s.TemperatureCelsius = x
	case dcgmSMClockMHz:
		s.SMClockHertz = x * 1e6
	}
}

// Source reads the current state of the GPUs it watches. OpenDCGM returns one. The
// collector calls Devices once per scrape; it must be safe for concurrent use. An error
// means the reading failed as a whole: the collector then exports
// slogate_gpu_collector_up 0 and no per-GPU series.
type Source interface {
	Devices(ctx context.Context) ([]Sample, error)
}

// The GPU gauges, read from a Source at scrape time.
var (
	gpuLabels = []string{"gpu", "uuid"}

	gpuUpDesc = prometheus.NewDesc("slogate_gpu_collector_up",
		"1 if slogate's last reading of the GPUs from DCGM succeeded, 0 if DCGM is unavailable or the reading failed.", nil, nil)
	gpuUtilizationDesc = prometheus.NewDesc("slogate_gpu_utilization_ratio",
		"Fraction of the last sample period during which one or more kernels ran on the GPU, 0-1 (DCGM_FI_DEV_GPU_UTIL / 100).", gpuLabels, nil)
	gpuMemoryUsedDesc = prometheus.NewDesc("slogate_gpu_memory_used_bytes",
		"Framebuffer memory in use on the GPU (DCGM_FI_DEV_FB_USED).", gpuLabels, nil)
	gpuMemoryTotalDesc = prometheus.NewDesc("slogate_gpu_memory_total_bytes",
		"Total framebuffer memory of the GPU (DCGM_FI_DEV_FB_TOTAL).", gpuLabels, nil)
	gpuPowerDesc = prometheus.NewDesc("slogate_gpu_power_watts",
		"Power drawn by the GPU board (DCGM_FI_DEV_POWER_USAGE).", gpuLabels, nil)
	gpuTemperatureDesc = prometheus.NewDesc("slogate_gpu_temperature_celsius",
		"GPU temperature (DCGM_FI_DEV_GPU_TEMP).", gpuLabels, nil)
	gpuSMClockDesc = prometheus.NewDesc("slogate_gpu_sm_clock_hertz",
		"Current SM clock of the GPU (DCGM_FI_DEV_SM_CLOCK).", gpuLabels, nil)
)

// collector exports one reading of a Source per scrape. A nil source stands for
// DCGM being unavailable: only slogate_gpu_collector_up 0 is exported.
type collector struct {
	src Source
	log *slog.Logger

	mu      sync.Mutex
	failing bool // the last reading failed; logged once when it starts and once when it ends
}

var _ prometheus.Collector = (*collector)(nil)

// NewCollector returns a collector that reads src once per scrape and exports
// slogate_gpu_collector_up (1 when the reading succeeded) and, when it did, the per-GPU
// gauges labelled gpu and uuid; measurements the source reports as NaN are left out. With
// a nil src it exports slogate_gpu_collector_up 0 and nothing else. When readings start
// failing it logs one warning, and one line again when they recover, never one per
// scrape. A nil logger discards. The collector is safe for concurrent use.
func NewCollector(src Source, logger *slog.Logger) prometheus.Collector {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &collector{src: src, log: logger}
}

// Describe sends every descriptor the collector may emit.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{gpuUpDesc, gpuUtilizationDesc, gpuMemoryUsedDesc,
		gpuMemoryTotalDesc, gpuPowerDesc, gpuTemperatureDesc, gpuSMClockDesc} {
		ch <- d
	}
}

// Collect reads the source once and sends the up gauge and, if the reading succeeded,
// each GPU's known measurements. A second sample of the same GPU index is dropped.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	if c.src == nil {
		ch <- gauge(gpuUpDesc, 0)
		return
	}
	samples, err := c.src.Devices(context.Background())
	c.noteOutcome(err)
	if err != nil {
		ch <- gauge(gpuUpDesc, 0)
		return
	}
	ch <- gauge(gpuUpDesc, 1)
	seen := make(map[int]bool, len(samples))
	for _, s := range samples {
		if seen[s.Index] {
			continue
		}
		seen[s.Index] = true
		labels := []string{strconv.Itoa(s.Index), s.UUID}
		for _, m := range []struct {
			d *prometheus.Desc
			v float64
		}{
			{gpuUtilizationDesc, s.Utilization}, {gpuMemoryUsedDesc, s.MemoryUsedBytes},
			{gpuMemoryTotalDesc, s.MemoryTotalBytes}, {gpuPowerDesc, s.PowerWatts},
			{gpuTemperatureDesc, s.TemperatureCelsius}, {gpuSMClockDesc, s.SMClockHertz},
		} {
			if !math.IsNaN(m.v) && !math.IsInf(m.v, 0) {
				ch <- gauge(m.d, m.v, labels...)
			}
		}
	}
}

// noteOutcome logs the start and the end of a run of failed readings.
func (c *collector) noteOutcome(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err != nil && !c.failing:
		c.log.Warn("reading the GPUs failed; slogate_gpu_collector_up is 0 until a reading succeeds", "err", err)
	case err == nil && c.failing:
		c.log.Info("reading the GPUs works again")
	}
	c.failing = err != nil
}

// NewDCGMCollector opens DCGM as setting says and returns the GPU collector to register
// and the closer to call at shutdown. setting is DCGMOff (a collector that exports
// nothing), DCGMEmbedded, or the address of a standalone nv-hostengine (see OpenDCGM).
// When DCGM cannot be opened it logs one warning saying why and returns a collector that
// exports slogate_gpu_collector_up 0 and nothing else. Its error is only for a setting
// that is not valid. The closer is never nil and may be called more than once.
func NewDCGMCollector(setting string, logger *slog.Logger) (prometheus.Collector, io.Closer, error) {
	if err := ValidateDCGM(setting); err != nil {
		return nil, nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if setting == DCGMOff {
		return offCollector{}, nopCloser{}, nil
	}
	src, closer, err := OpenDCGM(setting)
	if err != nil {
		logger.Warn("no GPU metrics: slogate_gpu_collector_up stays 0", "dcgm", setting, "err", err)
		return NewCollector(nil, logger), nopCloser{}, nil
	}
	logger.Info("reading GPU metrics from DCGM", "dcgm", setting)
	return NewCollector(src, logger), closer, nil
}

// offCollector is the collector of DCGMOff: it exports nothing.
type offCollector struct{}

func (offCollector) Describe(chan<- *prometheus.Desc) {}
func (offCollector) Collect(chan<- prometheus.Metric) {}

// gauge returns a constant gauge sample of d.
func gauge(d *prometheus.Desc, v float64, labels ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

type nopCloser struct{}

func (nopCloser) Close() error { return nil }

// dcgmTarget is a parsed DCGM setting other than DCGMOff.
type dcgmTarget struct {
	embedded bool
	addr     string // host:port, or a DCGM connection string (tcp://, unix://, vsock://)
}

// ValidateDCGM reports whether setting is a valid DCGM setting: DCGMOff, DCGMEmbedded,
// host:port of a standalone nv-hostengine (its default port is 5555), or a DCGM
// connection string tcp://host:port, unix:///path or vsock://cid:port (DCGM 4.5 or
// newer). None of these holds a space or a control character.
func ValidateDCGM(setting string) error {
	if setting == DCGMOff {
		return nil
	}
	_, err := parseDCGM(setting)
	return err
}

func parseDCGM(setting string) (dcgmTarget, error) {
	switch {
	case strings.ContainsFunc(setting, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }):
		// No host, address or socket path that DCGM could reach holds one: a stray space
		// or newline from a manifest would otherwise fail only at every connection attempt.
		return dcgmTarget{}, fmt.Errorf("DCGM setting %q holds a space or control character", setting)
	case setting == DCGMEmbedded:
		return dcgmTarget{embedded: true}, nil
	case strings.HasPrefix(setting, "tcp://") || strings.HasPrefix(setting, "unix://") || strings.HasPrefix(setting, "vsock://"):
		if _, rest, _ := strings.Cut(setting, "://"); rest == "" {
			return dcgmTarget{}, fmt.Errorf("DCGM setting %q: the connection string has no address", setting)
		}
		return dcgmTarget{addr: setting}, nil
	}
	host, port, err := net.SplitHostPort(setting)
	if err == nil && host != "" {
		if n, perr := strconv.ParseUint(port, 10, 16); perr == nil && n > 0 {
			return dcgmTarget{addr: setting}, nil
		}
	}
	return dcgmTarget{}, fmt.Errorf("DCGM setting %q: want %s, %s, host:port of nv-hostengine, or tcp://, unix:// or vsock:// connection string",
		setting, DCGMOff, DCGMEmbedded)
}

// redialSource is a Source over a connection that may fail, such as one to a
// standalone nv-hostengine that restarts or starts after slogate. It opens a connection
// when it has none, at most once per retry interval, and closes the connection whose
// reading fails, so that the next reading opens a new one. Safe for concurrent use.
type redialSource struct {
	open  func() (Source, io.Closer, error)
	clock clock.Clock
	retry time.Duration

	mu      sync.Mutex
	conn    Source // nil: not connected
	closer  io.Closer
	failed  time.Time // when the last open failed; zero: try at once
	lastErr error
	closed  bool
}

var (
	_ Source    = (*redialSource)(nil)
	_ io.Closer = (*redialSource)(nil)
)

// errClosed is returned by a redialSource's Devices after Close.
var errClosed = errors.New("GPU source closed")

// Devices reads the GPUs through the current connection, opening one first if needed.
func (r *redialSource) Devices(ctx context.Context) ([]Sample, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, errClosed
	}
	if r.conn == nil {
		if !r.failed.IsZero() && r.clock.Now().Sub(r.failed) < r.retry {
			return nil, fmt.Errorf("not connected, retrying within %v: %w", r.retry, r.lastErr)
		}
		conn, closer, err := r.open()
		if err != nil {
			r.failed, r.lastErr = r.clock.Now(), err
			return nil, err
		}
		r.conn, r.closer, r.failed, r.lastErr = conn, closer, time.Time{}, nil
	}
	samples, err := r.conn.Devices(ctx)
	if err != nil {
		_ = r.closer.Close() // the connection is likely gone; its close error adds nothing
		r.conn, r.closer = nil, nil
		return nil, err
	}
	return samples, nil
}

// Close closes the current connection, if any; later readings fail.
func (r *redialSource) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if r.conn == nil {
		return nil
	}
	err := r.closer.Close()
	r.conn, r.closer = nil, nil
	return err
}

// recovered calls f and turns a panic in it into an error; what prefixes f's error.
func recovered(what string, f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%s: panic: %v", what, p)
		}
	}()
	if err := f(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
