package proxy

import (
	"errors"
	"net"
	"os"
	"sync"
	"syscall"
)

// watcher tells of client connections that hang up or have bytes to read, for the
// connections of detached streams, without a goroutine or a buffer per connection: one
// epoll instance of its own, read by one goroutine. A connection is in this instance
// and, independently, in the Go runtime's; a registration here never reads a byte, so
// what the client sends stays for whoever reads the connection next.
//
// The instance is itself waited for through the runtime's network poller (an epoll
// descriptor is readable while it has events), never in a blocking epoll_wait: a thread
// blocked in a system call keeps its P until the runtime's monitor takes it back, up to
// 10 ms later, and with GOMAXPROCS=1 that stalls every stream of the process.
//
// Every registration is one-shot: it reports at most one event, and is ended by that
// event, by cancel, or by neither when the watcher stops.
type watcher struct {
	epfd   *os.File
	rc     syscall.RawConn
	mu     sync.Mutex
	next   uint64
	subs   map[uint64]*watch
	closed bool
	done   chan struct{}
}

// watch is one registration.
type watch struct {
	id uint64
	fd int
	fn func(watchEvent)
}

// watchEvent is what a registration reports.
type watchEvent uint8

const (
	hungUp   watchEvent = iota + 1 // the client closed or reset its connection
	readable                       // the client sent bytes (only when asked for)
)

// newWatcher starts a watcher; it runs until stop.
func newWatcher() (*watcher, error) {
	fd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	if err := syscall.SetNonblock(fd, true); err != nil { // so that os.NewFile polls it
		syscall.Close(fd)
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "epoll")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	w := &watcher{epfd: f, rc: rc, subs: make(map[uint64]*watch), next: 1, done: make(chan struct{})}
	go w.loop()
	return w, nil
}

// errNoFD is returned for a connection the watcher cannot reach the socket of.
var errNoFD = errors.New("proxy: connection has no socket to watch")

// add watches c, calling fn once, on the watcher's goroutine, when the client hangs up,
// or, with wantReadable, when it sent bytes. fn must not block. The registration must be
// cancelled (or have fired) before c is closed or handed on.
func (w *watcher) add(c net.Conn, wantReadable bool, fn func(watchEvent)) (*watch, error) {
	if t, ok := c.(interface{ NetConn() net.Conn }); ok { // TLS: the socket underneath
		c = t.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil, errNoFD
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil, err
	}
	events := uint32(syscall.EPOLLRDHUP | syscall.EPOLLONESHOT) // EPOLLHUP and EPOLLERR are always reported
	if wantReadable {
		events |= syscall.EPOLLIN
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil, net.ErrClosed
	}
	wt := &watch{id: w.next, fn: fn}
	w.next++
	var ctlErr error
	if err := rc.Control(func(fd uintptr) {
		wt.fd = int(fd)
		ev := syscall.EpollEvent{Events: events, Fd: int32(wt.id), Pad: int32(wt.id >> 32)}
		ctlErr = w.ctl(syscall.EPOLL_CTL_ADD, wt.fd, &ev)
	}); err != nil {
		return nil, err
	}
	if ctlErr != nil {
		return nil, ctlErr
	}
	w.subs[wt.id] = wt
	return wt, nil
}

// cancel ends a registration. It reports whether the registration was still pending:
// false when its event was already delivered (or is being delivered), or the watcher
// stopped. After it returns, fn is not called.
func (w *watcher) cancel(wt *watch) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.subs[wt.id]; !ok {
		return false
	}
	delete(w.subs, wt.id)
	_ = w.ctl(syscall.EPOLL_CTL_DEL, wt.fd, nil)
	return true
}

// ctl changes the instance's set; w.mu is held, and w is not closed.
func (w *watcher) ctl(op, fd int, ev *syscall.EpollEvent) error {
	var err error
	if cerr := w.rc.Control(func(epfd uintptr) { err = syscall.EpollCtl(int(epfd), op, fd, ev) }); cerr != nil {
		return cerr
	}
	return err
}

// loop delivers events until stop.
func (w *watcher) loop() {
	defer close(w.done)
	events := make([]syscall.EpollEvent, 128)
	for {
		n := 0
		err := w.rc.Read(func(epfd uintptr) bool {
			var err error
			for {
				n, err = syscall.EpollWait(int(epfd), events, 0) // never blocks
				if err != syscall.EINTR {
					break
				}
			}
			return err == nil && n > 0 // else the poller waits for the next event
		})
		if err != nil {
			return // stop closed the instance
		}
		for _, ev := range events[:n] {
			w.deliver(ev)
		}
	}
}

// deliver calls the function of the registration ev is for, unless it was cancelled
// after the kernel queued the event.
func (w *watcher) deliver(ev syscall.EpollEvent) {
	id := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
	w.mu.Lock()
	wt, ok := w.subs[id]
	if ok {
		delete(w.subs, id)
		_ = w.ctl(syscall.EPOLL_CTL_DEL, wt.fd, nil)
	}
	w.mu.Unlock()
	if !ok {
		return
	}
	what := hungUp
	if ev.Events&syscall.EPOLLIN != 0 {
		// Bytes to read, perhaps followed by the end: the reader will find both.
		what = readable
	}
	wt.fn(what)
}

// stop ends the loop and releases the epoll instance. Registrations still pending are
// dropped without their function being called.
func (w *watcher) stop() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	clear(w.subs)
	w.epfd.Close() // wakes the loop
	w.mu.Unlock()
	<-w.done
}
