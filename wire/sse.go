package wire

import "bytes"

// DefaultMaxEvent is the default limit, in bytes, on one Server-Sent Event
// (see SSEParser).
const DefaultMaxEvent = 1 << 20

// bom is the UTF-8 byte order mark, which may start an event stream.
var bom = []byte{0xEF, 0xBB, 0xBF}

// Event is one Server-Sent Event, or one comment.
//
// Data and Raw alias buffers of the parser: they are valid only until the
// emit callback returns (SSEParser.Feed) or until the next call to Next
// (SSEReader). Callers copy what they keep.
type Event struct {
	// Name is the value of the last "event:" field, "" if none.
	Name string
	// ID is the last event ID: the value of the latest "id:" field seen in
	// the stream so far (it persists across events, as the WHATWG spec says).
	// It is "" for comments.
	ID string
	// Data is the value of the event's "data:" lines joined with "\n"; for a
	// comment, the text after the ':' (one leading space removed).
	Data []byte
	// Comment marks a comment line (":...").
	Comment bool
	// Raw holds the exact bytes of the event as they appeared on the wire,
	// including the blank line that ended it and any bytes before it that
	// formed no event (blank lines, blocks without data). See SSEParser for
	// the guarantee that makes the stream lossless.
	Raw []byte
}

// IsDone reports whether the event is the "data: [DONE]" that ends an OpenAI
// stream.
func (e Event) IsDone() bool {
	return !e.Comment && string(e.Data) == "[DONE]"
}

// SSEParser splits a Server-Sent Events stream into events as bytes arrive
// (push style). It follows the WHATWG parsing rules that matter on this wire:
// lines end with "\n", "\r\n" or "\r" (a "\r" ending one read and a "\n"
// starting the next form one line ending); "data:" lines accumulate joined
// with "\n"; "event:" and "id:" set the name and the last event ID; the value
// loses one leading space; a line without a colon is a field with an empty
// value; unknown fields (and "retry:") are ignored; a blank line ends an event,
// which is emitted when it has at least one data line or a name (the spec
// would drop a named event without data; slogate keeps it); a UTF-8 BOM at the
// start of the stream is ignored.
//
// Comments: every comment line is emitted at once as its own Event with
// Comment set, so that a proxy sees keep-alives as they come. A comment
// between events (nothing but blank lines since the last event) owns its line:
// its Raw is the bytes since the last emitted event up to and including the
// comment line. A comment inside an event (after a field line of an event that
// has not ended) has a nil Raw: its line stays in the Raw of the surrounding
// event, in place.
//
// Lossless: the Raw of every emitted event, concatenated in the order emitted,
// followed by Pending(), is exactly the input fed so far. A proxy that forwards
// the Raw of each event it keeps, and Pending() at the end of the stream,
// forwards the stream byte for byte. The boundaries between Raws do not depend
// on how the input was split across calls, with one exception: when a call
// ends between the "\r" and the "\n" of the line ending that completes an event
// (or a comment between events), the event is emitted at once with Raw ending
// in "\r", and the "\n" becomes the first byte of the next Raw (or of
// Pending); the events themselves are the same.
//
// Memory is bounded: an event (its Raw, including leading bytes that formed no
// event) longer than the limit fails with ErrEventTooLarge. The parser reuses
// its buffers, so steady-state parsing does not allocate.
//
// The zero value is ready to use with DefaultMaxEvent. An SSEParser is not
// safe for concurrent use.
type SSEParser struct {
	max   int
	buf   []byte // held-back bytes: the pending event, then unscanned bytes
	start int    // offset in the current window where the pending event starts
	scan  int    // offset in the window up to which lines were processed
	probe int    // offset in the window up to which no line ending was found
	data  []byte // data buffer of the pending event
	name  string // event name of the pending event
	id    string // last event ID
	names string // the last distinct name seen, reused to avoid allocations
	err   error  // sticky ErrEventTooLarge

	sawData  bool // the pending event has a data line
	sawField bool // a field line was seen since the last blank line
	skipLF   bool // the last line ended with "\r" at the end of the window
	bomDone  bool // the start of the stream was checked for a BOM
}

// NewSSEParser returns a parser whose events may be at most maxEvent bytes;
// maxEvent <= 0 means DefaultMaxEvent.
func NewSSEParser(maxEvent int) *SSEParser {
	return &SSEParser{max: maxEvent}
}

// maxKept is the largest buffer Reset keeps for the next stream.
const maxKept = 64 << 10

// Reset makes p ready to parse a new stream, as a new parser with the same limit would.
// It keeps its buffers when they are at most 64 KiB, so that a parser reused across
// streams does not allocate once warm, and one huge event does not pin its memory.
func (p *SSEParser) Reset() {
	buf, data := p.buf[:0], p.data[:0]
	if cap(buf) > maxKept {
		buf = nil
	}
	if cap(data) > maxKept {
		data = nil
	}
	*p = SSEParser{max: p.max, buf: buf, data: data, names: p.names}
}

func (p *SSEParser) limit() int {
	if p.max <= 0 {
		return DefaultMaxEvent
	}
	return p.max
}

// Feed parses b, calling emit for every event it completes, in order. b is not
// retained: bytes of an incomplete event are copied and held back (Pending).
// Event.Raw and Event.Data are valid only during the emit call.
//
// If emit returns an error, Feed stops and returns it; the parser keeps the
// rest of b and stays usable (the next Feed continues after the event that
// emit refused). If an event exceeds the limit, Feed returns ErrEventTooLarge,
// keeps every byte not yet emitted in Pending, and fails every later call.
func (p *SSEParser) Feed(b []byte, emit func(Event) error) error {
	if p.err != nil {
		return p.err
	}
	win, inPlace := b, len(p.buf) == 0
	if !inPlace {
		p.buf = append(p.buf, b...)
		win = p.buf
	}
	var err error
	for err == nil {
		ev, ok, perr := p.next(win)
		if perr != nil {
			p.err, err = perr, perr
			break
		}
		if !ok {
			break
		}
		err = emit(ev)
	}
	p.keep(win, inPlace)
	return err
}

// Pending returns the bytes fed but not yet returned in the Raw of an event:
// an incomplete event, blank lines, or a block that formed no event. A proxy
// forwards them at the end of the stream. The slice is valid until the next
// call to Feed.
func (p *SSEParser) Pending() []byte { return p.buf }

// keep moves the not yet emitted bytes of win to the front of p.buf.
func (p *SSEParser) keep(win []byte, inPlace bool) {
	rest := win[p.start:]
	if inPlace {
		p.buf = append(p.buf[:0], rest...)
	} else {
		p.buf = p.buf[:copy(p.buf, rest)]
	}
	p.scan -= p.start
	p.probe -= p.start
	p.start = 0
}

// next processes complete lines of win from p.scan until one completes an
// event. ok is false when win holds no further complete event.
func (p *SSEParser) next(win []byte) (ev Event, ok bool, err error) {
	if !p.bomDone && !p.skipBOM(win) {
		return Event{}, false, nil
	}
	for {
		if p.skipLF && p.scan < len(win) {
			if win[p.scan] == '\n' {
				p.scan++
				p.probe = p.scan
			}
			p.skipLF = false
		}
		i := indexEOL(win[p.probe:])
		if i < 0 {
			p.probe = len(win)
			if len(win)-p.start > p.limit() {
				return Event{}, false, ErrEventTooLarge
			}
			return Event{}, false, nil
		}
		eol := p.probe + i
		end := eol + 1
		if win[eol] == '\r' {
			switch {
			case end == len(win):
				p.skipLF = true
			case win[end] == '\n':
				end++
			}
		}
		line := win[p.scan:eol]
		p.scan, p.probe = end, end
		if end-p.start > p.limit() {
			return Event{}, false, ErrEventTooLarge
		}
		if ev, ok := p.line(win, line, end); ok {
			return ev, true, nil
		}
	}
}

// skipBOM steps over a BOM at the start of the stream. It returns false while
// the window is too short to tell.
func (p *SSEParser) skipBOM(win []byte) bool {
	rest := win[p.scan:]
	n := min(len(rest), len(bom))
	if !bytes.Equal(rest[:n], bom[:n]) {
		p.bomDone = true
		return true
	}
	if n < len(bom) {
		return false
	}
	p.scan += len(bom)
	p.probe = p.scan
	p.bomDone = true
	return true
}

// indexEOL returns the index of the first '\r' or '\n' in b, or -1.
func indexEOL(b []byte) int {
	i := bytes.IndexByte(b, '\n')
	seg := b
	if i >= 0 {
		seg = b[:i]
	}
	if j := bytes.IndexByte(seg, '\r'); j >= 0 {
		return j
	}
	return i
}

// line processes one complete line (without its ending) that ends at offset
// end of win, and returns the event it completes, if any.
func (p *SSEParser) line(win, line []byte, end int) (Event, bool) {
	if len(line) == 0 {
		return p.dispatch(win, end)
	}
	if line[0] == ':' {
		ev := Event{Comment: true, Data: trimSpace1(line[1:])}
		if !p.sawField {
			ev.Raw = win[p.start:end]
			p.start = end
		}
		return ev, true
	}
	p.sawField = true
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], trimSpace1(line[i+1:])
	}
	switch string(name) {
	case "data":
		if p.sawData {
			p.data = append(p.data, '\n')
		}
		p.data = append(p.data, value...)
		p.sawData = true
	case "event":
		p.name = p.intern(value)
	case "id":
		if bytes.IndexByte(value, 0) < 0 && string(value) != p.id {
			p.id = string(value)
		}
	}
	return Event{}, false
}

// dispatch handles a blank line ending at offset end of win.
func (p *SSEParser) dispatch(win []byte, end int) (ev Event, ok bool) {
	if p.sawData || p.name != "" {
		ev = Event{Name: p.name, ID: p.id, Data: p.data, Raw: win[p.start:end]}
		ok = true
		p.start = end
	}
	p.data = p.data[:0]
	p.name = ""
	p.sawData, p.sawField = false, false
	return ev, ok
}

// intern returns v as a string, reusing the previous name when equal so that
// streams that name every event alike do not allocate.
func (p *SSEParser) intern(v []byte) string {
	if string(v) != p.names {
		p.names = string(v)
	}
	return p.names
}

func trimSpace1(b []byte) []byte {
	if len(b) > 0 && b[0] == ' ' {
		return b[1:]
	}
	return b
}
