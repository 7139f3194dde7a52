package proxy

import (
	"errors"
	"net"
	"sync"
	"syscall"
)

// watcher tells of client connections that hang up or have bytes to read, for the
// connections of detached streams, without a goroutine or a buffer per connection: one
// epoll instance of its own, watched by one goroutine blocked in epoll_wait. A
// connection is in this instance and, independently, in the Go runtime's; a
// registration here never reads a byte, so what the client sends stays for whoever
// reads the connection next.
//
// Every registration is one-shot: it reports at most one event, and is ended by that
// event, by cancel, or by neither when the watcher stops.
type watcher struct {
	epfd   int
	wake   [2]int // a pipe: a byte in wake[1] ends the loop
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
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	w := &watcher{epfd: epfd, subs: make(map[uint64]*watch), next: 1, done: make(chan struct{})}
	if err := syscall.Pipe2(w.wake[:], syscall.O_NONBLOCK|syscall.O_CLOEXEC); err != nil {
		syscall.Close(epfd)
		return nil, err
	}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN} // id 0: the wake pipe
	if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, w.wake[0], &ev); err != nil {
		w.closeFDs()
		return nil, err
	}
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
		ctlErr = syscall.EpollCtl(w.epfd, syscall.EPOLL_CTL_ADD, wt.fd, &ev)
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
	_ = syscall.EpollCtl(w.epfd, syscall.EPOLL_CTL_DEL, wt.fd, nil)
	return true
}

// loop delivers events until stop.
func (w *watcher) loop() {
	defer close(w.done)
	events := make([]syscall.EpollEvent, 128)
	for {
		n, err := syscall.EpollWait(w.epfd, events, -1)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return
		}
		for _, ev := range events[:n] {
			id := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
			if id == 0 {
				return // stop
			}
			w.mu.Lock()
			wt, ok := w.subs[id]
			if ok {
				delete(w.subs, id)
				_ = syscall.EpollCtl(w.epfd, syscall.EPOLL_CTL_DEL, wt.fd, nil)
			}
			w.mu.Unlock()
			if !ok {
				continue // cancelled after the kernel queued the event
			}
			what := hungUp
			if ev.Events&syscall.EPOLLIN != 0 {
				// Bytes to read, perhaps followed by the end: the reader will find both.
				what = readable
			}
			wt.fn(what)
		}
	}
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
	w.mu.Unlock()
	_, _ = syscall.Write(w.wake[1], []byte{0})
	<-w.done
	w.closeFDs()
}

func (w *watcher) closeFDs() {
	syscall.Close(w.wake[0])
	syscall.Close(w.wake[1])
	syscall.Close(w.epfd)
}
