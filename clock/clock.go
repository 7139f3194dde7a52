// Package clock tells the time and makes timers and tickers, so that code which waits
// can be driven by a test without sleeping. Production code takes a Clock and defaults
// to Real; tests pass a *Fake and move it with Step or SetTime.
//
// The shape is that of k8s.io/utils/clock (Clock, Timer with C/Stop/Reset, Ticker with
// C/Stop), trimmed to what slogate uses, with a fake that can also tell a test when
// the code under test is waiting on it (BlockUntil).
package clock

import "time"

// Clock tells the time and makes timers and tickers on its time. Implementations are
// safe for concurrent use.
type Clock interface {
	Now() time.Time
	Since(t time.Time) time.Duration
	// After is NewTimer(d).C(): the channel receives the time once d has passed.
	After(d time.Duration) <-chan time.Time
	NewTimer(d time.Duration) Timer
	// NewTicker panics if d is not positive, like time.NewTicker.
	NewTicker(d time.Duration) Ticker
}

// Timer is a time.Timer behind an interface. As with time.Timer since Go 1.23, no
// value sent before a Stop or Reset is received after it.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
	Reset(d time.Duration) bool
}

// Ticker is a time.Ticker behind an interface.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

// Real is the wall clock: the time package.
type Real struct{}

var _ Clock = Real{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// Since returns time.Since(t).
func (Real) Since(t time.Time) time.Duration { return time.Since(t) }

// After returns time.After(d).
func (Real) After(d time.Duration) <-chan time.Time { return time.After(d) }

// NewTimer returns a time.NewTimer(d).
func (Real) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

// NewTicker returns a time.NewTicker(d).
func (Real) NewTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }

type realTicker struct{ t *time.Ticker }

func (r realTicker) C() <-chan time.Time { return r.t.C }
func (r realTicker) Stop()               { r.t.Stop() }

// Or returns c, or Real when c is nil: the default of a Clock option.
func Or(c Clock) Clock {
	if c == nil {
		return Real{}
	}
	return c
}
