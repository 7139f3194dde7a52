package admission

import (
	"math"
	"sync"

	"github.com/slogate/slogate/wire"
)

// defaultBytesPerToken is where the estimate starts for a model: English text and code
// run at three to five bytes per token with the BPE tokenizers of current models.
const defaultBytesPerToken = 4.0

// maxLearnedModels bounds the per-model estimates, whatever model names clients send.
const maxLearnedModels = 64

// estimator estimates a prompt's length in tokens: exact for token-id prompts,
// otherwise from its text size at a bytes-per-token ratio learned per model from the
// usage the engine reports. Safe for concurrent use.
type estimator struct {
	mu  sync.Mutex
	bpt map[string]float64
}

// tokens estimates the input tokens of a prompt sent to model.
func (e *estimator) tokens(model string, p wire.PromptSize) int {
	if p.TextBytes == 0 {
		return p.TokenIDs
	}
	return p.TokenIDs + int(math.Ceil(float64(p.TextBytes)/e.bytesPerToken(model)))
}

func (e *estimator) bytesPerToken(model string) float64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	if v, ok := e.bpt[model]; ok {
		return v
	}
	return defaultBytesPerToken
}

// learn updates model's ratio from a finished request whose engine reported
// inputTokens for prompt p (an exponentially weighted average, weight 0.1, of ratios
// clamped to [1, 16] bytes per token).
func (e *estimator) learn(model string, p wire.PromptSize, inputTokens int) {
	textTokens := inputTokens - p.TokenIDs
	if p.TextBytes == 0 || textTokens <= 0 {
		return
	}
	ratio := min(max(float64(p.TextBytes)/float64(textTokens), 1), 16)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.bpt == nil {
		e.bpt = make(map[string]float64)
	}
	old, ok := e.bpt[model]
	switch {
	case ok:
		e.bpt[model] = 0.9*old + 0.1*ratio
	case len(e.bpt) < maxLearnedModels:
		e.bpt[model] = ratio
	}
}
