//go:build !linux

package proxy

import (
	"errors"
	"net"
)

// watcher is Linux's epoll (watch_linux.go); elsewhere there is none, and streams are
// not detached: they stay on net/http's connection goroutine, which watches the client.
type watcher struct{}

type watch struct{}

type watchEvent uint8

const (
	hungUp watchEvent = iota + 1
	readable
)

func newWatcher() (*watcher, error) {
	return nil, errors.New("proxy: detached streams need epoll (Linux)")
}

func (*watcher) add(net.Conn, bool, func(watchEvent)) (*watch, error) {
	return nil, errors.New("proxy: no watcher")
}

func (*watcher) cancel(*watch) bool { return false }

func (*watcher) stop() {}
