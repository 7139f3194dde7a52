package wire

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
)

// MaxDepth is the deepest nesting of JSON arrays and objects that Inspect
// accepts; the top-level object counts as depth 1. Deeper input fails with
// ErrTooDeep. Requests of the OpenAI API nest far less; the limit bounds the
// recursion of the scanner.
const MaxDepth = 64

// maxIntValue is the largest integer Inspect accepts for max_tokens, n and
// token ids. Larger values are never meaningful to an engine and keeping them
// inside int32 lets callers do arithmetic on them without overflow checks.
const maxIntValue = math.MaxInt32

// scanner is a strict, single-pass JSON scanner over a byte slice. It never
// copies the input: strings are returned as sub-slices of it together with
// their decoded length. It tracks nesting depth and records the first field
// error (a valid value of the wrong kind) while it keeps scanning, so that
// malformed JSON is always reported as such.
type scanner struct {
	data     []byte
	pos      int
	depth    int
	fieldErr *FieldError
	keyBuf   [maxKeyLen]byte
}

func (s *scanner) syntaxErr(msg string) error {
	return &SyntaxError{Offset: s.pos, Msg: msg, Err: ErrMalformed}
}

// invalid records a field error at the current position unless one is already
// recorded; the first error wins.
func (s *scanner) invalid(field, msg string) {
	s.invalidOff(s.pos, field, msg)
}

// invalidOff is invalid for a value that starts at offset off.
func (s *scanner) invalidOff(off int, field, msg string) {
	if s.fieldErr == nil {
		s.fieldErr = &FieldError{Field: field, Offset: off, Msg: msg}
	}
}

// invalidAt records a field error for a value at offset off whose path is
// built from a format; the path is only formatted for the first error.
func (s *scanner) invalidAt(off int, msg, format string, args ...any) {
	if s.fieldErr == nil {
		s.invalidOff(off, fmt.Sprintf(format, args...), msg)
	}
}

func (s *scanner) skipWS() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// peek skips whitespace and returns the next byte, or 0 at the end of input
// (a NUL byte in the input is also returned as 0; it is never valid there).
func (s *scanner) peek() byte {
	s.skipWS()
	if s.pos >= len(s.data) {
		return 0
	}
	return s.data[s.pos]
}

// end checks that only whitespace follows the top-level value.
func (s *scanner) end() error {
	if s.peek() != 0 || s.pos < len(s.data) {
		return s.syntaxErr("unexpected data after top-level value")
	}
	return nil
}

// unexpected returns the error for a byte that cannot start what was expected.
func (s *scanner) unexpected(what string) error {
	if s.pos >= len(s.data) {
		return s.syntaxErr("unexpected end of input, expected " + what)
	}
	return s.syntaxErr(fmt.Sprintf("invalid character %q, expected %s", s.data[s.pos], what))
}

// enter consumes the '{' or '[' at the current position.
func (s *scanner) enter() error {
	s.depth++
	if s.depth > MaxDepth {
		return &SyntaxError{Offset: s.pos, Msg: fmt.Sprintf("more than %d levels", MaxDepth), Err: ErrTooDeep}
	}
	s.pos++
	return nil
}

// member moves to the next member of the object being scanned, given the
// number i of members already read. It returns more=false once it has
// consumed the closing '}'; otherwise it returns the key and leaves the
// scanner at the member's value.
func (s *scanner) member(i int) (key str, more bool, err error) {
	c := s.peek()
	if c == '}' {
		s.pos++
		s.depth--
		return str{}, false, nil
	}
	if i > 0 {
		if c != ',' {
			return str{}, false, s.unexpected("',' or '}' after object member")
		}
		s.pos++
		c = s.peek()
	}
	if c != '"' {
		return str{}, false, s.unexpected("string for object key")
	}
	if key, err = s.scanString(); err != nil {
		return str{}, false, err
	}
	if s.peek() != ':' {
		return str{}, false, s.unexpected("':' after object key")
	}
	s.pos++
	return key, true, nil
}

// element moves to the next element of the array being scanned, given the
// number i of elements already read. It returns more=false once it has
// consumed the closing ']'; otherwise the scanner is left at the element.
func (s *scanner) element(i int) (more bool, err error) {
	c := s.peek()
	if c == ']' {
		s.pos++
		s.depth--
		return false, nil
	}
	if i > 0 {
		if c != ',' {
			return false, s.unexpected("',' or ']' after array element")
		}
		s.pos++
	}
	return true, nil
}

// skipValue validates and skips any JSON value.
func (s *scanner) skipValue() error {
	switch c := s.peek(); c {
	case '"':
		_, err := s.scanString()
		return err
	case '{':
		return s.skipObject()
	case '[':
		return s.skipArray()
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	default:
		if c == '-' || c >= '0' && c <= '9' {
			_, _, err := s.scanNumber()
			return err
		}
		return s.unexpected("beginning of value")
	}
}

func (s *scanner) skipObject() error {
	if err := s.enter(); err != nil {
		return err
	}
	for i := 0; ; i++ {
		_, more, err := s.member(i)
		if err != nil || !more {
			return err
		}
		if err := s.skipValue(); err != nil {
			return err
		}
	}
}

func (s *scanner) skipArray() error {
	if err := s.enter(); err != nil {
		return err
	}
	for i := 0; ; i++ {
		more, err := s.element(i)
		if err != nil || !more {
			return err
		}
		if err := s.skipValue(); err != nil {
			return err
		}
	}
}

func (s *scanner) literal(lit string) error {
	if !bytes.HasPrefix(s.data[s.pos:], []byte(lit)) {
		return s.unexpected("literal " + lit)
	}
	s.pos += len(lit)
	return nil
}

// scanNumber scans a JSON number. isInt reports whether it was written as a
// non-negative integer with no fraction or exponent.
func (s *scanner) scanNumber() (num []byte, isInt bool, err error) {
	d, start := s.data, s.pos
	i := start
	neg := i < len(d) && d[i] == '-'
	if neg {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		i = digits(d, i)
	default:
		s.pos = i
		return nil, false, s.syntaxErr("invalid number")
	}
	isInt = !neg
	if i < len(d) && d[i] == '.' {
		if i+1 >= len(d) || d[i+1] < '0' || d[i+1] > '9' {
			s.pos = i + 1
			return nil, false, s.syntaxErr("invalid number: no digits after decimal point")
		}
		i, isInt = digits(d, i+1), false
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			s.pos = i
			return nil, false, s.syntaxErr("invalid number: no digits in exponent")
		}
		i, isInt = digits(d, i), false
	}
	s.pos = i
	return d[start:i], isInt, nil
}

func digits(d []byte, i int) int {
	for i < len(d) && d[i] >= '0' && d[i] <= '9' {
		i++
	}
	return i
}

// intValue converts a scanned number to a non-negative int no larger than
// maxIntValue. Numbers written with a fraction or exponent are accepted when
// their value is integral (1.0, 1e3), as the engines' validators accept them.
func intValue(num []byte, isInt bool) (int, bool) {
	if isInt {
		v := 0
		for _, c := range num {
			v = v*10 + int(c-'0')
			if v > maxIntValue {
				return 0, false
			}
		}
		return v, true
	}
	f, err := strconv.ParseFloat(string(num), 64)
	if err != nil || f < 0 || f > maxIntValue || f != math.Trunc(f) {
		return 0, false
	}
	return int(f), true
}
