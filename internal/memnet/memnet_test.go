package memnet

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"testing/synctest"
	"time"
)

// Inside a bubble, a server on the in-memory network and its client run on the
// bubble's clock: an answer that the handler streams an hour apart arrives an hour
// apart to the nanosecond, and the test takes no time.
func TestServerOnVirtualTime(t *testing.T) {
	wall := time.Now()
	synctest.Test(t, func(t *testing.T) {
		s := NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "first\n")
			http.NewResponseController(w).Flush()
			time.Sleep(time.Hour)
			_, _ = io.WriteString(w, "second\n")
		}))
		defer s.Close()
		start := time.Now()
		resp, err := s.Client.Get(s.URL + "/")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		buf := make([]byte, 6)
		if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "first\n" {
			t.Fatalf("first read %q, %v", buf, err)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("the first line came %v after the request, want at once", d)
		}
		rest, err := io.ReadAll(resp.Body)
		if err != nil || string(rest) != "second\n" {
			t.Fatalf("rest %q, %v", rest, err)
		}
		if d := time.Since(start); d != time.Hour {
			t.Errorf("the second line came %v after the request, want 1h", d)
		}
	})
	if d := time.Since(wall); d > time.Minute {
		t.Errorf("an hour of virtual time took %v", d)
	}
}

// A closed listener refuses new connections and stops Accept.
func TestListenerClose(t *testing.T) {
	l := Listen()
	accepted := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			c.Close()
		}
		accepted <- err
	}()
	c, err := l.Dial(context.Background(), "tcp", "anything:80")
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	c.Close()
	if err := <-accepted; err != nil {
		t.Fatalf("Accept: %v", err)
	}
	l.Close()
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close: %v, want net.ErrClosed", err)
	}
	if _, err := l.Dial(context.Background(), "tcp", ""); err == nil {
		t.Error("Dial after Close succeeded")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Listen().Dial(ctx, "tcp", ""); !errors.Is(err, context.Canceled) {
		t.Errorf("Dial with a cancelled context: %v, want context.Canceled", err)
	}
}
