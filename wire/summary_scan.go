package wire

import (
	"errors"
	"fmt"
)

// Helpers of ScanChunk: reading keys and typed values.

// nextKey moves to member i of the object being scanned and returns its decoded key
// (valid until the next key is read); more is false once the object has ended.
func nextKey(s *scanner, i int) (key []byte, more bool, err error) {
	k, more, err := s.member(i)
	if err != nil || !more {
		return nil, more, err
	}
	return s.name(k), true, nil
}

// optStr reads a string or null (the zero str).
func optStr(s *scanner, field string) (str, error) {
	switch s.peek() {
	case 'n':
		return str{}, s.literal("null")
	case '"':
		return s.scanString()
	}
	if err := s.skipValue(); err != nil {
		return str{}, err
	}
	return str{}, shapeError(fmt.Sprintf("%q is not a string", field))
}

// optCount reads a non-negative integer or null into dst.
func optCount(s *scanner, dst *int) error {
	switch c := s.peek(); {
	case c == 'n':
		return s.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		num, isInt, err := s.scanNumber()
		if err != nil {
			return err
		}
		v, ok := intValue(num, isInt)
		if !ok {
			return shapeError("a token count is not a non-negative integer")
		}
		*dst = v
		return nil
	}
	if err := s.skipValue(); err != nil {
		return err
	}
	return shapeError("a token count is not a number")
}

// finishReasons are the finish reasons engines send, shared so that reading them does
// not allocate.
var finishReasons = [...]string{"stop", "length", "tool_calls", "abort", "error", "content_filter", "repetition"}

func finishReason(v str) string {
	if !v.esc {
		for _, r := range finishReasons {
			if string(v.raw) == r {
				return r
			}
		}
		return string(v.raw)
	}
	return string(unescape(nil, v.raw))
}

func shapeError(msg string) error {
	return fmt.Errorf("wire: chunk: %w: %s", ErrUnexpectedShape, msg)
}

// malformedFirst returns err, unless data is not valid JSON at all: then the syntax
// error, which is the more useful report.
func malformedFirst(data []byte, err error) error {
	if !errors.Is(err, ErrUnexpectedShape) {
		return err
	}
	v := scanner{data: data}
	if serr := v.skipValue(); serr != nil {
		return serr
	}
	if serr := v.end(); serr != nil {
		return serr
	}
	return err
}
