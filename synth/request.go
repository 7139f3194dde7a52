package synth

import (
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/slogate/slogate/wire"
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
	route         wire.Route // the generation route (routes.go); completions when unknown
	input, output int
	seed          uint64
	sharedPrefix  int // leading tokens shared by every prompt of the run
	// wordsPerToken, when set, makes the prompt text of about input tokens instead of
	// token ids, for engines that refuse token-id prompts (see textPrompts).
	wordsPerToken float64
}

// appendBody appends the JSON body of a streaming request for p to dst, in the shape of
// p's route (appendRouteBody); for completions:
// token ids, temperature 0, ignore_eos, max_tokens = the target output, and usage on
// every chunk (continuous_usage_stats) so the tokens received by any moment are known.
// modelJSON is the model name already encoded as a JSON string.
func (p prompt) appendBody(dst []byte, modelJSON []byte) []byte {
	if p.route.Generates() && p.route != wire.RouteCompletions {
		return p.appendRouteBody(dst, modelJSON)
	}
	dst = append(dst, `{"model":`...)
	dst = append(dst, modelJSON...)
	dst = append(dst, `,"prompt":`...)
	if p.wordsPerToken > 0 {
		dst = p.appendText(dst)
	} else {
		dst = p.appendIDs(dst)
	}
	dst = append(dst, `,"max_tokens":`...)
	dst = strconv.AppendInt(dst, int64(p.output), 10)
	dst = append(dst, `,"temperature":0,"ignore_eos":true,"stream":true,`...)
	dst = append(dst, `"stream_options":{"include_usage":true,"continuous_usage_stats":true}}`...)
	return dst
}

// rngs returns the random sources of the shared prefix and of the rest of p.
func (p prompt) rngs() (shared, own *rand.Rand) {
	return rand.New(rand.NewPCG(0x5106a7e, 0xfeed)), rand.New(rand.NewPCG(p.seed, p.seed^0x9e3779b97f4a7c15))
}

// appendIDs appends p's prompt as a JSON array of token ids.
func (p prompt) appendIDs(dst []byte) []byte {
	shared, own := p.rngs()
	dst = append(dst, '[')
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
	return append(dst, ']')
}

// appendText appends p's prompt as a JSON string of random words, as many as input
// tokens take at the calibrated rate; the shared prefix's words are the same in every
// prompt.
func (p prompt) appendText(dst []byte) []byte {
	shared, own := p.rngs()
	words := max(int(float64(p.input)*p.wordsPerToken+0.5), 1)
	prefix := int(float64(p.sharedPrefix) * p.wordsPerToken)
	dst = append(dst, '"')
	for i := range words {
		rng := own
		if i < prefix {
			rng = shared
		}
		if i > 0 {
			dst = append(dst, ' ')
		}
		dst = append(dst, promptWords[rng.IntN(len(promptWords))]...)
	}
	return append(dst, '"')
}

// promptWords are the words of text prompts: common, plain ASCII, so that every
// tokenizer reads each as one or two tokens and JSON needs no escaping.
var promptWords = strings.Fields(`time year people way day man thing woman life child world school state
family student group country problem hand part place case week company system program
question work government number night point home water room mother area money story fact
month lot right study book eye job word business issue side kind head house service friend
father power hour game line end member law car city community name president team minute
idea kid body information back parent face others level office door health person art war
history party result change morning reason research girl guy moment air teacher force
education foot boy age policy process music market sense nation plan college interest death
experience effect use class control care field development role effort rate heart drug show
leader light voice wife police mind price report decision son view relationship town road
arm difference value building action model season society tax director position player record
paper space ground form event official matter center couple site project activity star table
need court oil situation cost industry figure street image phone data picture practice piece
land product doctor wall patient worker news test movie north love support technology step
baby computer type attention film tree source organization hair window evidence population
site`)
