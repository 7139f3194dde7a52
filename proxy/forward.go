package proxy

import (
	"net/http"
	"net/http/httputil"
	"net/textproto"
	"strings"
)

// forward sends an admitted inference request to the engine and copies the answer to
// the client through the exchange's tap, which measures it. It does what httputil's
// ReverseProxy does for the routes passed through — hop-by-hop headers dropped both
// ways, the client's forwarding headers dropped, no default User-Agent added, the
// engine's trailers passed on, the client's connection aborted when the copy breaks —
// without its per-request copies, trace hooks and copy buffer: a stream's bytes are
// written from the tap's queue, and flushed once per read of the engine.
func (p *Proxy) forward(w http.ResponseWriter, ex *exchange) {
	out := p.outgoing(ex)
	resp, err := p.inferenceRT.RoundTrip(out)
	if err != nil {
		p.errorHandler(w, out, err)
		return
	}
	// The request is sent: the answer does not hold on to it, nor to its body, which for
	// a long prompt is tens of KiB for as long as the answer streams.
	ex.body, resp.Request = nil, nil
	removeHopByHop(resp.Header)
	body := p.tapAnswer(ex, resp)
	h := w.Header()
	for k, vv := range resp.Header {
		h[k] = append(h[k], vv...)
	}
	announced := len(resp.Trailer)
	if announced > 0 {
		keys := make([]string, 0, announced)
		for k := range resp.Trailer {
			keys = append(keys, k)
		}
		h.Add("Trailer", strings.Join(keys, ", "))
	}
	w.WriteHeader(resp.StatusCode)
	if _, sse := body.(*sseTap); sse && p.detachable(ex, resp, h) && p.handOff(w, ex, resp, body) {
		return
	}
	flush := http.NewResponseController(w).Flush
	if err := body.writeTo(w, flush); err != nil {
		body.Close()
		panic(http.ErrAbortHandler) // net/http aborts the client's connection
	}
	body.Close() // before the trailers: reading them ends the body
	if len(resp.Trailer) == 0 {
		return
	}
	_ = flush() // a trailer needs chunked encoding, whatever the body's length
	if len(resp.Trailer) == announced {
		for k, vv := range resp.Trailer {
			h[k] = append(h[k], vv...)
		}
		return
	}
	for k, vv := range resp.Trailer {
		for _, v := range vv {
			h.Add(http.TrailerPrefix+k, v)
		}
	}
}

// outgoing returns the request to send to the engine for ex: the client's method, path
// and query on the engine's base URL, the client's headers but the hop-by-hop ones and
// the forwarding ones, and what the exchange changes (ex.rewrite).
func (p *Proxy) outgoing(ex *exchange) *http.Request {
	in := ex.r
	u := *in.URL
	out := (&http.Request{
		Method:     in.Method,
		URL:        &u,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     make(http.Header, len(in.Header)+2),
		RemoteAddr: in.RemoteAddr,
	}).WithContext(ex.ctx)
	(&httputil.ProxyRequest{In: in, Out: out}).SetURL(p.cfg.Upstream)
	for k, vv := range in.Header {
		if !isHopByHop(k) && !isForwarding(k) {
			out.Header[k] = vv // never changed in place: Set and Del replace or drop a key's values
		}
	}
	dropConnectionListed(in.Header, out.Header)
	if teTrailers(in.Header["Te"]) {
		out.Header.Set("Te", "trailers")
	}
	if _, ok := out.Header["User-Agent"]; !ok {
		out.Header.Set("User-Agent", "") // not Go's default
	}
	ex.rewrite(out)
	return out
}

// hopHeaders are the hop-by-hop headers of RFC 9110 section 7.6.1 and the older ones
// proxies drop too (ReverseProxy's list).
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func isHopByHop(k string) bool {
	for _, h := range hopHeaders {
		if k == h {
			return true
		}
	}
	return false
}

// isForwarding reports the forwarding headers a client may send, which slogate does not
// pass on (nor set): the engine is on loopback and the client's claims are not checked.
func isForwarding(k string) bool {
	switch k {
	case "Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto":
		return true
	}
	return false
}

// teTrailers reports whether a TE header says the client takes trailers.
func teTrailers(values []string) bool {
	for _, v := range values {
		for t := range strings.SplitSeq(v, ",") {
			if t, _, _ = strings.Cut(t, ";"); strings.EqualFold(textproto.TrimString(t), "trailers") {
				return true
			}
		}
	}
	return false
}

// removeHopByHop drops an answer's hop-by-hop headers, those its Connection header
// names included.
func removeHopByHop(h http.Header) {
	dropConnectionListed(h, h)
	for _, k := range hopHeaders {
		delete(h, k)
	}
}

// dropConnectionListed deletes from dst the headers that src's Connection header names
// (RFC 9110 section 7.6.1).
func dropConnectionListed(src, dst http.Header) {
	for _, f := range src["Connection"] {
		for sf := range strings.SplitSeq(f, ",") {
			if sf = textproto.TrimString(sf); sf != "" {
				dst.Del(sf)
			}
		}
	}
}
