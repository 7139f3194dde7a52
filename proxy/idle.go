package proxy

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// ErrStreamIdle is the cause with which slogate cancels the upstream request of a stream
// whose engine sent nothing for Config.StreamIdleTimeout.
var ErrStreamIdle = errors.New("proxy: the engine's stream was idle for too long")

// idleWatch cancels the upstream request of a stream that has been silent for longer than
// its timeout. The request's goroutine brackets each read of the upstream body with
// reading and read, and only the time spent blocked in such a read counts as silence: a
// client that reads slowly holds up slogate's writes, and with them its next read, but
// never makes the engine look idle. A nil *idleWatch watches nothing.
//
// The watch costs a timer, re-armed only when it expires (not on every read), and two
// atomic stores per read. Its methods are safe for concurrent use.
type idleWatch struct {
	timeout time.Duration
	cancel  context.CancelCauseFunc
	base    time.Time    // monotonic origin of since
	since   atomic.Int64 // when the pending read began, in ns after base; -1 between reads
	fired   atomic.Bool

	mu      sync.Mutex // orders the timer's re-arming with stop
	stopped bool
	timer   *time.Timer
}

// newIdleWatch starts watching: cancel is called with ErrStreamIdle once a read has been
// blocked for timeout.
func newIdleWatch(timeout time.Duration, cancel context.CancelCauseFunc) *idleWatch {
	w := &idleWatch{timeout: timeout, cancel: cancel, base: time.Now()}
	w.since.Store(-1)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.timer = time.AfterFunc(timeout, w.check)
	return w
}

// reading notes that a read of the upstream body begins.
func (w *idleWatch) reading() {
	if w != nil {
		w.since.Store(int64(time.Since(w.base)))
	}
}

// read notes that the read returned.
func (w *idleWatch) read() {
	if w != nil {
		w.since.Store(-1)
	}
}

// expired reports whether the watch cancelled the stream.
func (w *idleWatch) expired() bool { return w != nil && w.fired.Load() }

// stop ends the watch; the stream will not be cancelled by it afterwards.
func (w *idleWatch) stop() {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	w.timer.Stop()
}

// check runs when the timer expires: it cancels the stream when the pending read has
// lasted the timeout, and otherwise re-arms the timer for when it would have.
func (w *idleWatch) check() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	next := w.timeout
	if s := w.since.Load(); s >= 0 {
		idle := time.Since(w.base) - time.Duration(s)
		if idle >= w.timeout {
			w.fired.Store(true)
			w.stopped = true
			w.cancel(ErrStreamIdle)
			return
		}
		next = w.timeout - idle
	}
	w.timer.Reset(next)
}
