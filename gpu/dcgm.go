//go:build cgo && linux

package gpu

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>

// slogate_loadable reports whether the dynamic loader finds and loads the library name;
// it does not keep it loaded.
static int slogate_loadable(const char *name) {
	void *h = dlopen(name, RTLD_LAZY | RTLD_LOCAL);
	if (h == NULL) {
		return 0;
	}
	dlclose(h);
	return 1;
}
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/NVIDIA/go-dcgm/pkg/dcgm"

	"github.com/slogate/slogate/clock"
)

// This file reads the GPUs from NVIDIA DCGM through github.com/NVIDIA/go-dcgm, which
// loads libdcgm.so.4 with dlopen when DCGM is started. Every go-dcgm call except Init
// jumps into that library, so none is made unless Init succeeded, and none after
// Shutdown: a call into a library that is not loaded kills the process (SIGSEGV), which
// no recover can catch. Go panics of go-dcgm are recovered and returned as errors.

const (
	// dcgmLibrary is the library go-dcgm v1.4601.1 loads.
	dcgmLibrary = "libdcgm.so.4"
	// dcgmUpdateEvery is how often DCGM samples the watched fields.
	dcgmUpdateEvery = time.Second
	// dcgmRetryEvery is how often a lost standalone host engine is dialled again.
	dcgmRetryEvery = 30 * time.Second
)

// dcgmMeasures are the numeric fields read for every GPU. DCGM 4.6 renamed GPU_UTIL to
// GPU_UTIL_RATIO, but its value is still a percentage, 0-100.
var dcgmMeasures = map[dcgm.Short]dcgmMeasure{
	dcgm.DCGM_FI_DEV_GPU_UTIL_RATIO:    dcgmUtilPercent, // int64
	dcgm.DCGM_FI_DEV_FB_USED:           dcgmMemUsedMiB,  // int64
	dcgm.DCGM_FI_DEV_FB_TOTAL:          dcgmMemTotalMiB, // int64
	dcgm.DCGM_FI_DEV_BOARD_POWER_WATTS: dcgmPowerWatts,  // double
	dcgm.DCGM_FI_DEV_GPU_TEMP_CELSIUS:  dcgmTempCelsius, // int64
	dcgm.DCGM_FI_DEV_SM_CLOCK:          dcgmSMClockMHz,  // int64
}

// dcgmFields are the fields watched and read: the UUID (a string) and dcgmMeasures.
var dcgmFields = []dcgm.Short{
	dcgm.DCGM_FI_DEV_GPU_UUID, dcgm.DCGM_FI_DEV_GPU_UTIL_RATIO, dcgm.DCGM_FI_DEV_FB_USED, dcgm.DCGM_FI_DEV_FB_TOTAL,
	dcgm.DCGM_FI_DEV_BOARD_POWER_WATTS, dcgm.DCGM_FI_DEV_GPU_TEMP_CELSIUS, dcgm.DCGM_FI_DEV_SM_CLOCK,
}

// dcgmInUse is set while a source from OpenDCGM is open: go-dcgm keeps one connection
// per process in package variables, so two sources would share (and close) one.
var dcgmInUse atomic.Bool

// OpenDCGM opens the GPU readings of DCGM as setting says (see ValidateDCGM) and returns
// the source and the closer that releases DCGM; Close may be called more than once.
//
// With DCGMEmbedded it starts DCGM's host engine inside slogate now (this takes seconds
// and needs libdcgm.so.4 and the GPUs visible to the process) and watches every GPU it
// sees; any failure is returned. With the address of a standalone nv-hostengine it
// returns at once and connects at the first reading: a host engine that is not up yet,
// or that restarts later, makes readings fail (slogate_gpu_collector_up 0) and is dialled
// again at most every 30 s. The error wraps ErrDCGMUnavailable when libdcgm.so.4 is
// missing, DCGM fails to start or sees no GPU (ErrNoGPU), or another source from
// OpenDCGM is open in this process; it never panics.
func OpenDCGM(setting string) (Source, io.Closer, error) {
	t, err := parseDCGM(setting)
	if err != nil {
		return nil, nil, err
	}
	// Embedded, go-dcgm's Init reports a missing library itself; standalone, the first
	// dial is at the first reading, so a missing library is looked for now.
	if !t.embedded && !dcgmLoadable() {
		return nil, nil, fmt.Errorf("%w: %s not found by the dynamic loader (is DCGM installed and on the library path?)",
			ErrDCGMUnavailable, dcgmLibrary)
	}
	if !dcgmInUse.CompareAndSwap(false, true) {
		return nil, nil, fmt.Errorf("%w: another DCGM source is open in this process", ErrDCGMUnavailable)
	}
	if t.embedded {
		c, err := openDCGMConn(t)
		if err != nil {
			dcgmInUse.Store(false)
			return nil, nil, err
		}
		return c, &dcgmRelease{c: c}, nil
	}
	r := &redialSource{clock: clock.Real{}, retry: dcgmRetryEvery, open: func() (Source, io.Closer, error) {
		c, err := openDCGMConn(t)
		if err != nil {
			return nil, nil, err
		}
		return c, c, nil
	}}
	return r, &dcgmRelease{c: r}, nil
}

// dcgmLoadable reports whether the dynamic loader can load libdcgm.so.4.
func dcgmLoadable() bool {
	name := C.CString(dcgmLibrary)
	defer C.free(unsafe.Pointer(name))
	return C.slogate_loadable(name) != 0
}

// dcgmRelease closes a DCGM source once and lets OpenDCGM open another.
type dcgmRelease struct {
	c    io.Closer
	once sync.Once
	err  error
}

func (r *dcgmRelease) Close() error {
	r.once.Do(func() {
		r.err = r.c.Close()
		dcgmInUse.Store(false)
	})
	return r.err
}

// dcgmConn is one started DCGM (embedded, or connected to a host engine) watching
// dcgmFields on every GPU. Safe for concurrent use.
type dcgmConn struct {
	mu       sync.Mutex
	closed   bool
	gpus     []dcgm.GroupEntityPair
	group    dcgm.GroupHandle
	fields   dcgm.FieldHandle
	haveFG   bool // fields was created
	watching bool
}

var (
	_ Source    = (*dcgmConn)(nil)
	_ io.Closer = (*dcgmConn)(nil)
)

// openDCGMConn starts DCGM for t and watches the GPUs. On error nothing is left started.
func openDCGMConn(t dcgmTarget) (*dcgmConn, error) {
	err := recovered("starting DCGM", func() error {
		var err error
		switch {
		case t.embedded:
			_, err = dcgm.Init(dcgm.Embedded)
		case strings.Contains(t.addr, "://"):
			_, err = dcgm.Init(dcgm.Standalone, t.addr)
		default:
			_, err = dcgm.Init(dcgm.Standalone, t.addr, "0") // "0": a TCP address, not a socket path
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDCGMUnavailable, err)
	}
	c := &dcgmConn{}
	if err := recovered("watching the GPUs", c.watch); err != nil {
		_ = c.stop()
		return nil, fmt.Errorf("%w: %w", ErrDCGMUnavailable, err)
	}
	return c, nil
}

// watch finds the GPUs and asks DCGM to sample dcgmFields on them every second.
func (c *dcgmConn) watch() error {
	ids, err := dcgm.GetEntityGroupEntities(dcgm.FE_GPU)
	if err != nil {
		return err
	}
	if len(ids) == 0 {
		return ErrNoGPU
	}
	for _, id := range ids {
		c.gpus = append(c.gpus, dcgm.GroupEntityPair{EntityGroupId: dcgm.FE_GPU, EntityId: id})
	}
	c.group = dcgm.GroupAllGPUs()
	// Field group names are global to a host engine that several slogates may share.
	name := fmt.Sprintf("slogate-%d-%08x", os.Getpid(), rand.Uint32())
	if c.fields, err = dcgm.FieldGroupCreate(name, dcgmFields); err != nil {
		return err
	}
	c.haveFG = true
	every := int64(dcgmUpdateEvery / time.Microsecond)
	if err := dcgm.WatchFieldsWithGroupEx(c.fields, c.group, every, 0, 1); err != nil {
		return err
	}
	c.watching = true
	return nil
}

// Devices returns the latest sample DCGM took of each GPU. It fails when the reading
// fails or not one field of one GPU had a value.
func (c *dcgmConn) Devices(ctx context.Context) ([]Sample, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errClosed
	}
	var values []dcgm.FieldValue_v2
	err := recovered("reading the GPUs", func() error {
		var err error
		values, err = dcgm.EntitiesGetLatestValues(c.gpus, dcgmFields, 0)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading the GPUs from DCGM: %w", err)
	}
	return dcgmSamples(c.gpus, values)
}

// dcgmSamples turns DCGM's values into one sample per GPU, in the order of gpus.
func dcgmSamples(gpus []dcgm.GroupEntityPair, values []dcgm.FieldValue_v2) ([]Sample, error) {
	out := make([]Sample, len(gpus))
	at := make(map[uint]*Sample, len(gpus))
	for i, g := range gpus {
		out[i] = NewSample(int(g.EntityId), "")
		at[g.EntityId] = &out[i]
	}
	known := 0
	for _, v := range values {
		s := at[v.EntityID]
		if s == nil || v.EntityGroupId != dcgm.FE_GPU || v.Status != 0 {
			continue
		}
		if v.FieldID == dcgm.DCGM_FI_DEV_GPU_UUID {
			if v.FieldType == dcgm.DCGM_FT_STRING && v.StringValue != nil && !strings.HasPrefix(*v.StringValue, "<<<") {
				s.UUID = *v.StringValue
			}
			continue
		}
		m, ok := dcgmMeasures[v.FieldID]
		x := dcgmNumber(v)
		if !ok || math.IsNaN(x) {
			continue
		}
		known++
		s.setDCGM(m, x)
	}
	if known == 0 {
		return nil, errors.New("DCGM returned no value for any GPU")
	}
	return out, nil
}

// dcgmNumber returns a numeric field's value, or NaN when DCGM marks it blank, not
// found, not supported or not permitted. None of the fields read can legitimately reach
// DCGM's 32-bit blank range, so int64 values there count as blank too.
func dcgmNumber(v dcgm.FieldValue_v2) float64 {
	switch v.FieldType {
	case dcgm.DCGM_FT_INT64:
		if i := v.Int64(); i < dcgm.DCGM_FT_INT32_BLANK {
			return float64(i)
		}
	case dcgm.DCGM_FT_DOUBLE:
		if f := v.Float64(); f < dcgm.DCGM_FT_FP64_BLANK {
			return f
		}
	}
	return math.NaN()
}

// Close stops watching and stops DCGM (or disconnects from the host engine). Later
// readings fail.
func (c *dcgmConn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	return c.stop()
}

// stop undoes what watch did, as far as it got, and shuts DCGM down.
func (c *dcgmConn) stop() error {
	var errs []error
	if c.watching {
		errs = append(errs, recovered("unwatching the GPUs", func() error { return dcgm.UnwatchFields(c.fields, c.group) }))
	}
	if c.haveFG {
		errs = append(errs, recovered("destroying the field group", func() error { return dcgm.FieldGroupDestroy(c.fields) }))
	}
	errs = append(errs, recovered("stopping DCGM", dcgm.Shutdown))
	return errors.Join(errs...)
}
