package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/textproto"
)

// chunkedDecoder decodes an HTTP/1.1 chunked body (RFC 9112 section 7.1) in place, from
// the bytes of each read of the connection as they come, so that a stream's body needs
// no reader of its own above the socket. It accepts and rejects what net/http's chunked
// reader does (FuzzChunkedDecoder holds it to that): a chunk line ends in CRLF, with no
// other CR in it; its size is 1 to 16 hexadecimal digits; trailing spaces and tabs and a
// chunk extension (";" and what follows) are dropped; the CRLF after a chunk's data is
// required; chunk lines and extensions may not outweigh the data (net/http's count of
// excess overhead, which fails past 16 KiB). Trailers are read as net/http reads them
// (textproto's MIME header parser, on a section of at most maxTrailer bytes that ends in
// a blank line).
//
// The zero value is ready to decode a body from its start.
type chunkedDecoder struct {
	state   decodeState
	n       uint64 // the chunk's size while its line is read; then its data bytes left
	digits  int    // hexadecimal digits of the size read so far
	line    int    // bytes of the chunk line so far, CRLF excluded
	excess  int64  // net/http's count of overhead beyond 16 bytes a chunk and twice its data
	trailer []byte // the trailer section so far, once it is not empty
	header  http.Header
	fault   error
}

type decodeState uint8

const (
	stSize    decodeState = iota // the chunk size's digits
	stSizeWS                     // spaces or tabs after the digits: only more of them or CRLF may follow
	stExt                        // a chunk extension, up to CR
	stLineLF                     // the LF after a chunk line's CR
	stData                       // the chunk's data
	stDataCR                     // the CR after the data
	stDataLF                     // the LF after it
	stTrailer                    // the trailer section
	stDone                       // the body ended
)

const (
	// maxChunkLine bounds a chunk line without its CRLF: net/http's reader, above a
	// reader of 4 KiB, fails a line that does not fit in it.
	maxChunkLine = 4096 - 2
	// maxTrailer bounds the trailer section, its final blank line included (net/http
	// looks for its end within its reader's buffer).
	maxTrailer = 4096
	// maxExcess is net/http's bound on the overhead of chunk lines beyond what their
	// data justifies.
	maxExcess = 16 << 10
)

// The errors of a malformed chunked body. A body that ends early is io.ErrUnexpectedEOF.
var (
	errChunkLineLF     = errors.New("proxy: chunked line ends with bare LF")
	errChunkLineCR     = errors.New("proxy: invalid CR in chunked line")
	errChunkLineLong   = errors.New("proxy: chunk line too long")
	errChunkSize       = errors.New("proxy: invalid byte in chunk length")
	errChunkSizeEmpty  = errors.New("proxy: empty hex number for chunk length")
	errChunkSizeLarge  = errors.New("proxy: chunk length too large")
	errChunkExcess     = errors.New("proxy: chunked encoding contains too much non-data")
	errChunkMalformed  = errors.New("proxy: malformed chunked encoding")
	errTrailerTooLarge = errors.New("proxy: trailer section too large")
)

// decode decodes p, which follows the bytes decoded before. It moves the body's data in
// p to its front and returns its length, and how many of p's bytes came after the body's
// end (0 unless done). After an error, or once done, decoding ends: later calls return
// the same. Data that came before an error is still returned.
func (d *chunkedDecoder) decode(p []byte) (data, after int, err error) {
	if d.fault != nil {
		return 0, 0, d.fault
	}
	i := 0
	for i < len(p) && d.state != stDone {
		if d.state == stData {
			k := len(p) - i
			if uint64(k) > d.n {
				k = int(d.n)
			}
			copy(p[data:], p[i:i+k])
			data += k
			i += k
			if d.n -= uint64(k); d.n == 0 {
				d.state = stDataCR
			}
			continue
		}
		if d.state == stTrailer {
			used, unread, err := d.trailerBytes(p[i:])
			i += used
			if err != nil {
				return data, 0, d.fail(err)
			}
			after += unread
			continue
		}
		if err := d.frame(p[i]); err != nil {
			return data, 0, d.fail(err)
		}
		i++
	}
	if d.state == stDone {
		after += len(p) - i
	}
	return data, after, nil
}

// frame takes one byte of a chunk line or of the CRLF after a chunk's data.
func (d *chunkedDecoder) frame(b byte) error {
	switch d.state {
	case stDataCR:
		if b != '\r' {
			return errChunkMalformed
		}
		d.state = stDataLF
		return nil
	case stDataLF:
		if b != '\n' {
			return errChunkMalformed
		}
		d.state = stSize
		d.n, d.digits, d.line = 0, 0, 0
		return nil
	case stLineLF:
		if b != '\n' {
			return errChunkLineCR
		}
		return d.endLine()
	}
	switch b {
	case '\r':
		d.state = stLineLF
		return nil
	case '\n':
		return errChunkLineLF
	}
	if d.line++; d.line > maxChunkLine {
		return errChunkLineLong
	}
	switch d.state {
	case stSize:
		switch v, ok := hexValue(b); {
		case ok:
			if d.digits == 16 {
				return errChunkSizeLarge
			}
			d.n = d.n<<4 | uint64(v)
			d.digits++
		case b == ' ' || b == '\t':
			d.state = stSizeWS
		case b == ';':
			d.state = stExt
		default:
			return errChunkSize
		}
	case stSizeWS:
		// net/http trims spaces and tabs only at the line's end: a byte after them makes
		// them part of the size, which is then invalid (or, before a digit, a size
		// with a space in it).
		if b != ' ' && b != '\t' {
			return errChunkSize
		}
	case stExt:
		// anything but CR and LF, dropped
	}
	return nil
}

// endLine ends a chunk line (its CRLF read): the size is checked and the chunk begins.
func (d *chunkedDecoder) endLine() error {
	if d.digits == 0 {
		return errChunkSizeEmpty
	}
	d.excess += int64(d.line) + 2
	d.excess -= 16 + 2*int64(d.n)
	d.excess = max(d.excess, 0)
	if d.excess > maxExcess {
		return errChunkExcess
	}
	if d.n == 0 {
		d.state = stTrailer
		return nil
	}
	d.state = stData
	return nil
}

// trailerBytes takes bytes of the trailer section and reports how many it used: those
// up to and including the blank line that ends it (then the section is parsed and the
// body is done), or all of p. unread counts the used bytes the parser left after the
// header's end, as net/http's leaves them in its reader (a line ending in a bare LF
// ends the header before the CRLFCRLF that ended the section).
func (d *chunkedDecoder) trailerBytes(p []byte) (used, unread int, err error) {
	for i, b := range p {
		d.trailer = append(d.trailer, b)
		n := len(d.trailer)
		if n == 2 && string(d.trailer) == "\r\n" { // no trailers: the common case
			d.trailer = nil
			d.state = stDone
			return i + 1, 0, nil
		}
		if n >= 4 && string(d.trailer[n-4:]) == "\r\n\r\n" {
			src := bytes.NewReader(d.trailer)
			br := bufio.NewReaderSize(src, maxTrailer)
			h, err := textproto.NewReader(br).ReadMIMEHeader()
			if err != nil {
				return i + 1, 0, err
			}
			d.header = http.Header(h)
			unread = br.Buffered() + src.Len()
			d.trailer = nil
			d.state = stDone
			return i + 1, unread, nil
		}
		if n >= maxTrailer {
			return i + 1, 0, errTrailerTooLarge
		}
	}
	return len(p), 0, nil
}

// fail ends decoding with err.
func (d *chunkedDecoder) fail(err error) error {
	d.fault = err
	d.trailer = nil
	return err
}

// done reports whether the body ended.
func (d *chunkedDecoder) done() bool { return d.state == stDone }

// eof returns the error of a connection that ended at this point of the body: none
// once it is done, io.ErrUnexpectedEOF before.
func (d *chunkedDecoder) eof() error {
	if d.fault != nil {
		return d.fault
	}
	if d.state == stDone {
		return nil
	}
	return d.fail(io.ErrUnexpectedEOF)
}

func hexValue(b byte) (byte, bool) {
	switch {
	case '0' <= b && b <= '9':
		return b - '0', true
	case 'a' <= b && b <= 'f':
		return b - 'a' + 10, true
	case 'A' <= b && b <= 'F':
		return b - 'A' + 10, true
	}
	return 0, false
}
