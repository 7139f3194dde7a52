package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// decodeAll runs a chunkedDecoder over body, fed in pieces of the given sizes (cycled;
// the whole body at once when none), as reads of a connection would bring it. It
// returns the data, the trailers, the bytes after the body's end, and the error,
// io.ErrUnexpectedEOF when body ends before the chunked body does.
func decodeAll(body []byte, pieces []int) (data []byte, trailer http.Header, after int, err error) {
	var d chunkedDecoder
	rest := body
	for k := 0; len(rest) > 0; k++ {
		n := len(rest)
		if len(pieces) > 0 {
			n = min(max(pieces[k%len(pieces)], 1), len(rest))
		}
		p := append([]byte(nil), rest[:n]...)
		rest = rest[n:]
		m, a, err := d.decode(p)
		data = append(data, p[:m]...)
		if err != nil {
			return data, nil, 0, err
		}
		if d.done() {
			return data, d.header, a + len(rest), nil
		}
	}
	return data, nil, 0, d.eof()
}

// netHTTPChunked reads body as net/http reads the chunked body of an answer: through
// http.ReadResponse, above a 4 KiB reader. It returns the data, the trailers, the bytes
// left in the reader after the body, and the error.
func netHTTPChunked(body []byte) (data []byte, trailer http.Header, after int, err error) {
	head := "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	br := bufio.NewReaderSize(io.MultiReader(strings.NewReader(head), bytes.NewReader(body)), 4096)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, nil, 0, err
	}
	data, err = io.ReadAll(resp.Body)
	if err != nil {
		return data, nil, 0, err
	}
	rest, _ := io.ReadAll(br)
	return data, resp.Trailer, len(rest), nil
}

func TestChunkedDecoder(t *testing.T) {
	for _, tc := range []struct {
		name    string
		body    string
		data    string
		trailer http.Header
		after   int
		err     error
	}{
		{name: "chunks", body: "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", data: "hello world"},
		{name: "upper-case hex, extension, trailing blanks", body: "A;name=v \t\r\n0123456789\r\n0 \r\n\r\n", data: "0123456789"},
		{name: "trailers", body: "3\r\nabc\r\n0\r\nX-Finish: stop\r\nX-Tokens: 3\r\n\r\n", data: "abc",
			trailer: http.Header{"X-Finish": {"stop"}, "X-Tokens": {"3"}}},
		{name: "the next answer's bytes after the end", body: "1\r\na\r\n0\r\n\r\nHTTP/1.1", data: "a", after: 8},
		{name: "empty body", body: "0\r\n\r\n"},
		{name: "ends early in data", body: "5\r\nhel", data: "hel", err: io.ErrUnexpectedEOF},
		{name: "ends early in the trailers", body: "0\r\nX-A: b\r\n", err: io.ErrUnexpectedEOF},
		{name: "ends before the last CRLF", body: "1\r\na\r\n0\r\n", data: "a", err: io.ErrUnexpectedEOF},
		{name: "no CRLF after data", body: "1\r\nab\r\n", data: "a", err: errChunkMalformed},
		{name: "bare LF", body: "1\na\r\n0\r\n\r\n", err: errChunkLineLF},
		{name: "CR inside the line", body: "1;a\rb\r\na\r\n", err: errChunkLineCR},
		{name: "not hexadecimal", body: "x\r\n", err: errChunkSize},
		{name: "blank before the extension", body: "1 ;e\r\na\r\n", err: errChunkSize},
		{name: "leading blank", body: " 1\r\na\r\n", err: errChunkSize},
		{name: "no size", body: ";e\r\n", err: errChunkSizeEmpty},
		{name: "17 digits", body: "10000000000000000\r\n", err: errChunkSizeLarge},
		{name: "longest line", body: "1;" + strings.Repeat("e", maxChunkLine-2) + "\r\na\r\n0\r\n\r\n", data: "a"},
		{name: "largest trailer section", body: "0\r\nX-A: " + strings.Repeat("b", maxTrailer-len("X-A: \r\n\r\n")) + "\r\n\r\n",
			trailer: http.Header{"X-A": {strings.Repeat("b", maxTrailer-len("X-A: \r\n\r\n"))}}},
		{name: "line too long", body: "1;" + strings.Repeat("e", maxChunkLine) + "\r\n", err: errChunkLineLong},
		{name: "extensions outweigh the data", body: strings.Repeat("1;"+strings.Repeat("e", 1000)+"\r\na\r\n", 20), data: strings.Repeat("a", 16),
			err: errChunkExcess},
		{name: "trailers too large", body: "0\r\nX-A: " + strings.Repeat("b", maxTrailer), err: errTrailerTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, pieces := range [][]int{nil, {1}, {2, 3}, {7}} {
				data, trailer, after, err := decodeAll([]byte(tc.body), pieces)
				if !errors.Is(err, tc.err) {
					t.Fatalf("pieces %v: error %v, want %v", pieces, err, tc.err)
				}
				if string(data) != tc.data || !reflect.DeepEqual(trailer, tc.trailer) || after != tc.after {
					t.Errorf("pieces %v: data %q, trailer %v, after %d; want %q, %v, %d", pieces, data, trailer, after, tc.data, tc.trailer, tc.after)
				}
			}
			// net/http agrees on what is a valid body and what it holds.
			data, trailer, after, err := netHTTPChunked([]byte(tc.body))
			if (err == nil) != (tc.err == nil) || err == nil && (string(data) != tc.data || !sameHeader(trailer, tc.trailer) || after != tc.after) {
				t.Errorf("net/http: data %q, trailer %v, after %d, error %v", data, trailer, after, err)
			}
		})
	}
}

// sameHeader compares headers, nil and empty alike.
func sameHeader(a, b http.Header) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return reflect.DeepEqual(a, b)
}

// FuzzChunkedDecoder holds the decoder to net/http's chunked reader: for any body, fed
// in any pieces, both take it or both refuse it; what both take, they read alike (data,
// trailers and the bytes after the end); and before refusing, the decoder returned no
// byte net/http would not have.
func FuzzChunkedDecoder(f *testing.F) {
	f.Add([]byte("5\r\nhello\r\n0\r\n\r\n"), uint8(1), uint8(3))
	f.Add([]byte("3;x=y\r\nabc\r\n0\r\nX-A: b\r\n\r\n"), uint8(2), uint8(5))
	f.Add([]byte("1\r\na\r\n0\r\nX-A: b\n\r\n\r\nrest"), uint8(4), uint8(1))
	f.Add([]byte("1 \t\r\na\r\n0\r\n\r\n"), uint8(9), uint8(9))
	f.Add([]byte("1\r\na\r\nff\r\n"), uint8(0), uint8(0))
	f.Fuzz(func(t *testing.T, body []byte, p1, p2 uint8) {
		var pieces []int
		if p1 > 0 {
			pieces = []int{int(p1), max(int(p2), 1)}
		}
		data, trailer, after, err := decodeAll(body, pieces)
		want, wantTrailer, wantAfter, wantErr := netHTTPChunked(body)
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("decoder error %v, net/http error %v (pieces %v)", err, wantErr, pieces)
		}
		if err == nil {
			if !bytes.Equal(data, want) || !sameHeader(trailer, wantTrailer) || after != wantAfter {
				t.Fatalf("decoder read %q, %v, %d after; net/http %q, %v, %d after", data, trailer, after, want, wantTrailer, wantAfter)
			}
			return
		}
		if !bytes.HasPrefix(want, data) {
			t.Fatalf("before failing, the decoder returned %q; net/http %q", data, want)
		}
	})
}
