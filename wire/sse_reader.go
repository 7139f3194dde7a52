package wire

import "io"

// Buffer sizes of SSEReader: the initial buffer, and the least free space
// offered to each Read.
const (
	sseReadSize = 8 << 10
	sseMinRead  = 4 << 10
)

// maxEmptyReads is how many Reads in a row may return no bytes and no error
// before SSEReader gives up with io.ErrNoProgress.
const maxEmptyReads = 100

// SSEReader reads Server-Sent Events from an io.Reader (pull style). It is
// built on SSEParser and follows the same rules (see SSEParser for comments,
// Raw and the lossless guarantee). It reads directly into its own buffer, so
// steady-state reading does not allocate.
//
// An SSEReader is not safe for concurrent use.
type SSEReader struct {
	r     io.Reader
	p     SSEParser
	err   error // first error from r (io.EOF at the end)
	empty int   // consecutive Reads that returned nothing
}

// NewSSEReader returns a reader of the events in r whose events may be at most
// maxEvent bytes; maxEvent <= 0 means DefaultMaxEvent.
func NewSSEReader(r io.Reader, maxEvent int) *SSEReader {
	return &SSEReader{r: r, p: SSEParser{max: maxEvent}}
}

// Next returns the next event. Event.Raw and Event.Data are valid until the
// next call to Next.
//
// At the end of r, Next returns io.EOF when the stream ended cleanly, or
// io.ErrUnexpectedEOF when it ended inside an event: after a field line of an
// event that was not ended by a blank line, or inside a line that is not just
// spaces or tabs. The bytes of that event stay in Pending. Any other error of
// r is returned as it is, after the events completed before it. An event
// longer than the limit fails with ErrEventTooLarge. Once Next has returned an
// error it returns the same error again.
func (r *SSEReader) Next() (Event, error) {
	for {
		if r.p.err != nil {
			return Event{}, r.p.err
		}
		ev, ok, err := r.p.next(r.p.buf)
		if err != nil {
			r.p.err = err
			return Event{}, err
		}
		if ok {
			return ev, nil
		}
		if r.err != nil {
			return Event{}, r.final()
		}
		r.fill()
	}
}

// Pending returns the bytes read but not yet returned in the Raw of an event
// (see SSEParser.Pending). The slice is valid until the next call to Next.
func (r *SSEReader) Pending() []byte {
	return r.p.buf[r.p.start:]
}

// final returns the error for the end of the underlying reader.
func (r *SSEReader) final() error {
	if r.err != io.EOF {
		return r.err
	}
	if r.p.sawField {
		return io.ErrUnexpectedEOF
	}
	for _, c := range r.p.buf[r.p.scan:] {
		if c != ' ' && c != '\t' {
			return io.ErrUnexpectedEOF
		}
	}
	return io.EOF
}

// fill compacts the buffer and reads more bytes into it.
func (r *SSEReader) fill() {
	p := &r.p
	if p.start > 0 {
		p.keep(p.buf, false)
	}
	if cap(p.buf)-len(p.buf) < sseMinRead {
		grown := make([]byte, len(p.buf), max(2*cap(p.buf), len(p.buf)+sseReadSize))
		copy(grown, p.buf)
		p.buf = grown
	}
	n, err := r.r.Read(p.buf[len(p.buf):cap(p.buf)])
	p.buf = p.buf[:len(p.buf)+n]
	switch {
	case err != nil:
		r.err = err
	case n > 0:
		r.empty = 0
	default:
		if r.empty++; r.empty >= maxEmptyReads {
			r.err = io.ErrNoProgress
		}
	}
}
