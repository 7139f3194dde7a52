package synth

import (
	"math/rand/v2"
	"strconv"
)

// Prompts are token ids, which vLLM and SGLang take on /v1/completions: the input length
// is then exact without a tokenizer, and random ids make every prompt different from its
// first token, so prefix caching cannot flatter results.
//
// Ids are drawn from [idLow, idHigh): above the byte and control tokens of common
// vocabularies and below 30,000, so they exist in every vocabulary of 32K tokens or more.
const (
	idLow  = 1000
	idHigh = 30000
)

// prompt is the body of one probe request.
type prompt struct {
	input, output int
	seed          uint64
	sharedPrefix  int // leading tokens shared by every prompt of the run
}

// appendBody appends the JSON body of a streaming completions request for p to dst:
// token ids, temperature 0, ignore_eos, max_tokens = the target output, and usage on
// every chunk (continuous_usage_stats) so the tokens received by any moment are known.
// modelJSON is the model name already encoded as a JSON string.
func (p prompt) appendBody(dst []byte, modelJSON []byte) []byte {
	dst = append(dst, `{"model":`...)
	dst = append(dst, modelJSON...)
	dst = append(dst, `,"prompt":[`...)
	shared := rand.New(rand.NewPCG(0x5106a7e, 0xfeed))
	own := rand.New(rand.NewPCG(p.seed, p.seed^0x9e3779b97f4a7c15))
	for i := range p.input {
		if i > 0 {
			dst = append(dst, ',')
		}
		rng := own
		if i < p.sharedPrefix {
			rng = shared
		}
		dst = strconv.AppendInt(dst, int64(idLow+rng.IntN(idHigh-idLow)), 10)
	}
	dst = append(dst, `],"max_tokens":`...)
	dst = strconv.AppendInt(dst, int64(p.output), 10)
	dst = append(dst, `,"temperature":0,"ignore_eos":true,"stream":true,`...)
	dst = append(dst, `"stream_options":{"include_usage":true,"continuous_usage_stats":true}}`...)
	return dst
}
