package proxy

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/slogate/slogate/wire"
)

// passThrough forwards a request slogate does not inspect (not an inference request).
// Its body, if it has one, streams to the engine as it arrives, within BodyTimeout: a
// body that misses it ends the request with 408 and a closed connection.
func (p *Proxy) passThrough(w http.ResponseWriter, r *http.Request) {
	if p.cfg.BodyTimeout <= 0 || r.Body == nil || r.Body == http.NoBody {
		p.rp.ServeHTTP(w, r)
		return
	}
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(p.cfg.BodyTimeout)) != nil {
		p.rp.ServeHTTP(w, r)
		return
	}
	b := &timedBody{src: r.Body, rc: rc}
	r = r.WithContext(context.WithValue(r.Context(), timedBodyKey{}, b))
	r.Body = b
	p.rp.ServeHTTP(w, r)
}

type timedBodyKey struct{}

// timedBody is a pass-through request's body under its read deadline: it clears the
// deadline at the body's end, so that it does not bound the answer, and notes when the
// deadline passed first. The transport reads it on a goroutine of its own.
type timedBody struct {
	src     io.ReadCloser
	rc      *http.ResponseController
	expired atomic.Bool
}

func (b *timedBody) Read(p []byte) (int, error) {
	n, err := b.src.Read(p)
	switch {
	case err == io.EOF:
		_ = b.rc.SetReadDeadline(time.Time{})
	case err != nil && isTimeout(err):
		b.expired.Store(true)
	}
	return n, err
}

func (b *timedBody) Close() error { return b.src.Close() }

// bodyTimedOut answers a pass-through request whose body missed its deadline with 408,
// and reports whether it did.
func (p *Proxy) bodyTimedOut(w http.ResponseWriter, r *http.Request) bool {
	b, _ := r.Context().Value(timedBodyKey{}).(*timedBody)
	if b == nil || !b.expired.Load() {
		return false
	}
	w.Header().Set("Connection", "close")
	wire.WriteError(w, http.StatusRequestTimeout, wire.APIError{Message: "the request body did not arrive within " + p.cfg.BodyTimeout.String()})
	return true
}
