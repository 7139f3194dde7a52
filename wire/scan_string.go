package wire

import "unicode/utf8"

// maxKeyLen bounds the raw (escaped) length of an object key that is decoded
// to be matched against known field names. Escapes only shrink, so a decoded
// key always fits in a buffer of this size. Longer escaped keys match nothing.
const maxKeyLen = 256

// plain marks the bytes that a JSON string can hold as themselves with no
// further checks: printable ASCII other than '"' and '\\'.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// str is a scanned JSON string: raw holds the bytes between the quotes (still
// escaped when esc is set) and n is its length in bytes once unescaped.
type str struct {
	raw []byte
	n   int
	esc bool
}

// scanString scans the string starting at the '"' at the current position. It
// validates escapes, rejects control characters and invalid UTF-8, and
// computes the decoded length without decoding.
func (s *scanner) scanString() (str, error) {
	data := s.data
	start := s.pos + 1
	i, shrink, esc := start, 0, false
	for {
		for i < len(data) && plain[data[i]] {
			i++
		}
		if i >= len(data) {
			s.pos = i
			return str{}, s.syntaxErr("unterminated string")
		}
		switch c := data[i]; {
		case c == '"':
			s.pos = i + 1
			return str{raw: data[start:i], n: i - start - shrink, esc: esc}, nil
		case c == '\\':
			raw, dec, ok := escapeAt(data, i)
			if !ok {
				s.pos = i
				return str{}, s.syntaxErr("invalid escape in string")
			}
			i += raw
			shrink += raw - dec
			esc = true
		case c < 0x20:
			s.pos = i
			return str{}, s.syntaxErr("control character in string")
		default:
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size == 1 {
				s.pos = i
				return str{}, s.syntaxErr("invalid UTF-8 in string")
			}
			i += size
		}
	}
}

// escapeAt reads the escape sequence at data[i] (a backslash). It returns the
// number of raw bytes it spans and the number of UTF-8 bytes it decodes to. A
// surrogate pair spans both escapes and decodes to 4 bytes; a lone surrogate
// decodes to U+FFFD (3 bytes), as encoding/json does.
func escapeAt(data []byte, i int) (raw, dec int, ok bool) {
	if i+1 >= len(data) {
		return 0, 0, false
	}
	switch data[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2, 1, true
	case 'u':
	default:
		return 0, 0, false
	}
	r, ok := hex4(data, i+2)
	if !ok {
		return 0, 0, false
	}
	switch {
	case r >= 0xD800 && r < 0xDC00:
		if i+7 < len(data) && data[i+6] == '\\' && data[i+7] == 'u' {
			if r2, ok := hex4(data, i+8); ok && r2 >= 0xDC00 && r2 < 0xE000 {
				return 12, 4, true
			}
		}
		return 6, 3, true
	case r >= 0xDC00 && r < 0xE000:
		return 6, 3, true
	default:
		return 6, utf8.RuneLen(r), true
	}
}

// hex4 decodes four hex digits at data[i:].
func hex4(data []byte, i int) (rune, bool) {
	if i+4 > len(data) {
		return 0, false
	}
	var r rune
	for _, c := range data[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// unescape appends the decoded form of a validated raw string to dst.
func unescape(dst, raw []byte) []byte {
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			dst = append(dst, c)
			i++
			continue
		}
		switch c = raw[i+1]; c {
		case 'b':
			dst, i = append(dst, '\b'), i+2
		case 'f':
			dst, i = append(dst, '\f'), i+2
		case 'n':
			dst, i = append(dst, '\n'), i+2
		case 'r':
			dst, i = append(dst, '\r'), i+2
		case 't':
			dst, i = append(dst, '\t'), i+2
		case 'u':
			n, _, _ := escapeAt(raw, i)
			r, _ := hex4(raw, i+2)
			if n == 12 {
				r2, _ := hex4(raw, i+8)
				r = 0x10000 + (r-0xD800)<<10 + (r2 - 0xDC00)
			} else if r >= 0xD800 && r < 0xE000 {
				r = utf8.RuneError
			}
			dst, i = utf8.AppendRune(dst, r), i+n
		default: // '"', '\\', '/'
			dst, i = append(dst, c), i+2
		}
	}
	return dst
}

// name returns the decoded key for matching against field names. Keys without
// escapes are returned as they are; escaped keys are decoded into a buffer
// owned by the scanner (valid until the next call). Escaped keys longer than
// maxKeyLen cannot be a known field and yield nil.
func (s *scanner) name(k str) []byte {
	if !k.esc {
		return k.raw
	}
	if len(k.raw) > len(s.keyBuf) {
		return nil
	}
	return unescape(s.keyBuf[:0], k.raw)
}
