package proxy

import (
	"net"
	"syscall"
)

// alive reports whether an idle connection is still open and silent: a peek that does
// not wait finds nothing to read. A connection the engine closed (end of file), reset,
// or on which it sent something unasked (an answer to no request) is not alive. It
// costs one system call, once per request that reuses a connection.
func alive(nc net.Conn) bool {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var buf [1]byte
	open := false
	err = rc.Read(func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		open = err == syscall.EAGAIN // nothing to read: neither an end nor bytes
		return true                  // never wait
	})
	return err == nil && open
}
