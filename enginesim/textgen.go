package enginesim

// Output text. Each generated token is one piece of a small vocabulary of short words and
// punctuation, each of which the stand-in tokenizer reads back as exactly one token, so
// re-tokenising an answer gives its usage count.

var outputPieces = [...]string{
	" the", " and", " of", " to", " a", " in", " is", " it", " that", " for",
	" on", " with", " as", " this", " be", " at", " by", " from", " or", " an",
	" data", " GPU", " KV", " cost", " rate", " time", " load", " step", " path", " node",
	",", ".", " we", " can", " will", " not", " all", " one", " more", " when",
}

// loopPieces is the phrase a looping answer repeats.
var loopPieces = [...]string{" I", " say", " it", " once", " more", "."}

// piece returns the text of output token i of a request seeded with seed. A looping
// answer repeats loopPieces from its first token. It is a pure function.
func piece(seed uint64, i int, loop bool) string {
	if loop {
		return loopPieces[i%len(loopPieces)]
	}
	// SplitMix64 of (seed, i): cheap, stateless, and well mixed.
	z := seed + uint64(i+1)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return outputPieces[z%uint64(len(outputPieces))]
}

// appendText appends output tokens [from, to) of j's answer to dst: its scripted
// answer first, if it has one, then generated pieces.
func (j *job) appendText(dst []byte, from, to int) []byte {
	for i := from; i < to; i++ {
		if i < len(j.script) {
			dst = append(dst, j.script[i]...)
			continue
		}
		dst = append(dst, piece(j.seed, i, j.faults.Loop)...)
	}
	return dst
}
