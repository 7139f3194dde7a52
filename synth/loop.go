package synth

import (
	"bytes"
	"strings"
)

// The repetition test that marks a cell Looped (the published H200 context matrix,
// docs/simulator.md, discarded every cell whose output repeated itself). An answer loops
// when either:
//
//  1. its tail is periodic: of its last loopTail bytes (or the whole answer, if shorter
//     but at least loopMinText bytes), the last half or more consists of one unit of 2 to
//     loopMaxPeriod bytes repeated back to back at least loopMinRepeats times; or
//  2. it recycles itself: of its word 8-grams, more than loopNgramShare occur earlier in
//     the same answer (answers of at least loopMinWords words), counting the markers of a
//     numbered list ("7.", "12)") as one word whatever their number.
//
// The first catches a phrase or a character repeated verbatim, also after an answer that
// began normally; the second catches a cycle of sentences whose boundaries drift, or a
// numbered list whose items come round again under new numbers. Ordinary prose, code and
// the simulator's random words repeat 8-grams rarely (boilerplate such as license headers is the known false
// positive, and short answers are never judged).
const (
	loopTail       = 512
	loopMinText    = 64
	loopMaxPeriod  = 256
	loopMinRepeats = 4
	loopMinWords   = 64
	loopNgram      = 8
	loopNgramShare = 0.5
)

// Looped reports whether text repeats itself by the test above.
func Looped(text string) bool {
	return periodicTail(text) || recycled(text)
}

// periodicTail reports whether the end of text, at least half of its tail, is one unit
// repeated at least loopMinRepeats times.
func periodicTail(text string) bool {
	if len(text) < loopMinText {
		return false
	}
	tail := text[max(len(text)-loopTail, 0):]
	need := max(loopMinText, len(tail)/2)
	for p := 2; p <= min(loopMaxPeriod, len(tail)/loopMinRepeats); p++ {
		if n := periodicSuffix(tail, p); n >= need && n >= loopMinRepeats*p {
			return true
		}
	}
	return false
}

// periodicSuffix returns the length of the longest suffix of s that has period p.
func periodicSuffix(s string, p int) int {
	i := len(s) - p - 1
	for i >= 0 && s[i] == s[i+p] {
		i--
	}
	return len(s) - 1 - i
}

// recycled reports whether more than loopNgramShare of the word n-grams of text occurred
// earlier in it.
func recycled(text string) bool {
	words := strings.Fields(text)
	if len(words) < loopMinWords {
		return false
	}
	seen := make(map[string]struct{}, len(words))
	var key bytes.Buffer
	repeats, total := 0, 0
	for i := 0; i+loopNgram <= len(words); i++ {
		key.Reset()
		for _, w := range words[i : i+loopNgram] {
			key.WriteString(listMarker(w))
			key.WriteByte(' ')
		}
		total++
		if _, ok := seen[key.String()]; ok {
			repeats++
			continue
		}
		seen[key.String()] = struct{}{}
	}
	return float64(repeats) > loopNgramShare*float64(total)
}

// listMarker returns "#." for a numbered-list marker such as "12." (or "#)", "#:"), and
// any other word unchanged.
func listMarker(w string) string {
	n := len(w)
	if n < 2 || !strings.ContainsRune(".):", rune(w[n-1])) {
		return w
	}
	for i := range n - 1 {
		if w[i] < '0' || w[i] > '9' {
			return w
		}
	}
	return "#" + w[n-1:]
}
