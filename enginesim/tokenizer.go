package enginesim

import (
	"hash/fnv"
	"unicode/utf8"
)

// tokenizer is a deterministic stand-in for a model's tokenizer. It needs no vocabulary
// file and gives English text about four and a half bytes per token, like the BPE
// tokenizers of the models it stands in for:
//
//   - a run of ASCII letters and digits is split into pieces of at most four bytes, the
//     first of which carries one preceding space if there is one;
//   - every other rune (punctuation, symbols, non-ASCII letters, whitespace other than a
//     single space before a word) is one token, again carrying one preceding space.
//
// A piece's id is a hash of its bytes in [specialTokens, vocab). /tokenize, usage and the
// prefix cache all use this one function, so their counts agree. Safe for concurrent use.
type tokenizer struct{ vocab int }

// specialTokens are ids reserved below the text pieces; the chat template's markers use
// ids 1-6.
const specialTokens = 256

// count returns the number of tokens in text.
func (t tokenizer) count(text string) int {
	n := 0
	t.pieces(text, func(string) { n++ })
	return n
}

// appendIDs appends the token ids of text to dst.
func (t tokenizer) appendIDs(dst []int, text string) []int {
	t.pieces(text, func(p string) { dst = append(dst, t.id(p)) })
	return dst
}

func (t tokenizer) id(piece string) int {
	h := fnv.New32a()
	h.Write([]byte(piece))
	return specialTokens + int(h.Sum32()%uint32(t.vocab-specialTokens))
}

// pieces calls fn with each token of text, in order.
func (t tokenizer) pieces(text string, fn func(string)) {
	i := 0
	for i < len(text) {
		start := i
		if text[i] == ' ' && i+1 < len(text) && text[i+1] != ' ' {
			i++ // a single space joins the token that follows it
		}
		if isWordByte(text[i]) {
			end := i
			for end < len(text) && end-i < 4 && isWordByte(text[end]) {
				end++
			}
			fn(text[start:end])
			i = end
			for i < len(text) && isWordByte(text[i]) {
				end = min(i+4, len(text))
				for j := i; j < end; j++ {
					if !isWordByte(text[j]) {
						end = j
						break
					}
				}
				fn(text[i:end])
				i = end
			}
			continue
		}
		_, size := utf8.DecodeRuneInString(text[i:])
		i += size
		fn(text[start:i])
	}
}

func isWordByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
}
