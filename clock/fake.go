package clock

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/slogate/slogate/internal/signal"
)

// Fake is a Clock whose time moves only when Step or SetTime moves it. Its timers and
// tickers fire, in the order of their due times, from the Step or SetTime that reaches
// that time: a test decides when each one fires and never sleeps. BlockUntil tells it
// when the code under test has made the timers it is expected to wait on, so that a Step
// does not come before them. Safe for concurrent use.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	waiters []*fakeTimer   // the timers and tickers not yet fired (tickers: not stopped)
	changed signal.Changed // of waiters
}

var _ Clock = (*Fake)(nil)

// NewFake returns a Fake clock that reads t.
func NewFake(t time.Time) *Fake { return &Fake{now: t} }

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Since returns the fake time elapsed since t.
func (f *Fake) Since(t time.Time) time.Duration { return f.Now().Sub(t) }

// After returns the channel of a new fake timer of d.
func (f *Fake) After(d time.Duration) <-chan time.Time { return f.NewTimer(d).C() }

// NewTimer returns a timer that fires once the fake time has moved d on; at once if d is
// not positive.
func (f *Fake) NewTimer(d time.Duration) Timer {
	t := &fakeTimer{f: f, c: make(chan time.Time, 1)}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.arm(t, d)
	return t
}

// NewTicker returns a ticker that fires each time the fake time passes another d. Like
// a time.Ticker it drops the ticks its reader is too slow for; it panics if d is not
// positive.
func (f *Fake) NewTicker(d time.Duration) Ticker {
	if d <= 0 {
		panic("clock: non-positive interval for NewTicker")
	}
	t := &fakeTimer{f: f, c: make(chan time.Time, 1), period: d}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.arm(t, d)
	return fakeTicker{t}
}

// Step moves the fake time on by d and fires what falls due.
func (f *Fake) Step(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.setLocked(f.now.Add(d))
}

// SetTime sets the fake time to t, backwards too, and fires what falls due.
func (f *Fake) SetTime(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.setLocked(t)
}

// Waiters returns how many timers and tickers are waiting to fire.
func (f *Fake) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.waiters)
}

// HasWaiters reports whether a timer or ticker is waiting to fire.
func (f *Fake) HasWaiters() bool { return f.Waiters() > 0 }

// BlockUntil returns once at least n timers and tickers are waiting to fire. It never
// gives up: a test that waits for a timer the code does not make hangs until go test's
// -timeout ends it with every goroutine's stack. BlockUntilContext gives up.
func (f *Fake) BlockUntil(n int) { _ = f.BlockUntilContext(context.Background(), n) }

// BlockUntilContext is BlockUntil that returns ctx's error once ctx is done.
func (f *Fake) BlockUntilContext(ctx context.Context, n int) error {
	_, err := signal.Await(ctx, func() (int, <-chan struct{}) {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.waiters), f.changed.C()
	}, func(waiting int) bool { return waiting >= n })
	return err
}

// setLocked moves the time to t and fires every waiter due by then, earliest first; a
// ticker fires once however many of its periods t passes, and is due again at its first
// tick after t. f.mu is held.
func (f *Fake) setLocked(t time.Time) {
	f.now = t
	due := slices.DeleteFunc(slices.Clone(f.waiters), func(w *fakeTimer) bool { return w.at.After(t) })
	slices.SortStableFunc(due, func(a, b *fakeTimer) int { return a.at.Compare(b.at) })
	for _, w := range due {
		select {
		case w.c <- w.at:
		default: // a ticker's last tick is still unread
		}
		if w.period > 0 {
			w.at = w.at.Add((t.Sub(w.at)/w.period + 1) * w.period)
			continue
		}
		f.removeLocked(w)
	}
}

// arm makes t wait d from now, or fires it now if d is not positive. f.mu is held.
func (f *Fake) arm(t *fakeTimer, d time.Duration) {
	t.at = f.now.Add(d)
	if d <= 0 {
		t.c <- f.now
		return
	}
	f.waiters = append(f.waiters, t)
	f.changed.Broadcast()
}

// removeLocked takes t out of the waiters and reports whether it was waiting.
func (f *Fake) removeLocked(t *fakeTimer) bool {
	i := slices.Index(f.waiters, t)
	if i < 0 {
		return false
	}
	f.waiters = slices.Delete(f.waiters, i, i+1)
	f.changed.Broadcast()
	return true
}

// fakeTimer is a timer of a Fake, or with period > 0 a ticker.
type fakeTimer struct {
	f      *Fake
	c      chan time.Time
	at     time.Time     // when it fires next
	period time.Duration // a ticker's
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

// Stop stops the timer and drops a tick sent but not received, as a time.Timer does
// since Go 1.23; it reports whether the timer was waiting.
func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	return t.stopLocked()
}

func (t *fakeTimer) stopLocked() bool {
	select {
	case <-t.c:
	default:
	}
	return t.f.removeLocked(t)
}

// fakeTicker is the Ticker face of a fakeTimer with a period.
type fakeTicker struct{ t *fakeTimer }

func (k fakeTicker) C() <-chan time.Time { return k.t.c }
func (k fakeTicker) Stop()               { k.t.Stop() }

// Reset makes the timer wait d from now, dropping a tick sent but not received; it
// reports whether the timer was waiting.
func (t *fakeTimer) Reset(d time.Duration) bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	was := t.stopLocked()
	t.f.arm(t, d)
	return was
}
