package synth

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/slogate/slogate/wire"
)

// Engines that refuse token-id prompts get text, whose length in tokens is calibrated
// before the run (as the published H20-3e rate scan calibrated its lengths; see
// docs/simulator.md): the engine tokenizes a sample of the prompt words (POST /tokenize,
// or, where that does not exist, the usage of a one-token completion), and prompts then
// hold input × words-per-token words. Text prompts are close to the target length, not
// exact; the report says which kind a run used, and every request's usage gives its real
// input length.

// calibrationWords is the size of the sample the engine tokenizes.
const calibrationWords = 2000

// PromptKind says how a run wrote its prompts.
type PromptKind struct {
	Text          bool    `json:"text"`                      // false: token ids, exact lengths
	WordsPerToken float64 `json:"words_per_token,omitempty"` // text: the calibrated rate
}

// promptKind finds out whether the engine takes token-id prompts, and calibrates text
// prompts when it refuses them as invalid (400 or 422). Any other answer keeps token ids:
// an engine that is down or busy says nothing about its prompts, and the cells will
// report what it does.
func (t *Target) promptKind(ctx context.Context) (PromptKind, error) {
	probe := []byte(fmt.Sprintf(`{"model":%q,"prompt":[%d,%d,%d],"max_tokens":1}`, t.Model, idLow, idLow+1, idLow+2))
	status, _, err := t.call(ctx, http.MethodPost, "/v1/completions", probe)
	if err != nil || status != http.StatusBadRequest && status != http.StatusUnprocessableEntity {
		return PromptKind{}, nil
	}
	sample := prompt{input: calibrationWords, wordsPerToken: 1, seed: 0xca1}.appendText(nil)
	tokens, err := t.countTokens(ctx, sample)
	if err != nil {
		return PromptKind{}, fmt.Errorf("synth: the engine refuses token-id prompts and text could not be calibrated: %w", err)
	}
	return PromptKind{Text: true, WordsPerToken: float64(calibrationWords) / float64(tokens)}, nil
}

// countTokens returns the tokens of text (a JSON string): from /tokenize, else from the
// usage of a one-token completion.
func (t *Target) countTokens(ctx context.Context, text []byte) (int, error) {
	body := fmt.Appendf(nil, `{"model":%q,"prompt":%s}`, t.Model, text)
	if status, resp, err := t.call(ctx, http.MethodPost, "/tokenize", body); err == nil && status == http.StatusOK {
		var tok struct {
			Count int `json:"count"`
		}
		if json.Unmarshal(resp, &tok) == nil && tok.Count > 0 {
			return tok.Count, nil
		}
	}
	body = fmt.Appendf(nil, `{"model":%q,"prompt":%s,"max_tokens":1}`, t.Model, text)
	status, resp, err := t.call(ctx, http.MethodPost, "/v1/completions", body)
	if err != nil || status != http.StatusOK {
		return 0, fmt.Errorf("no /tokenize, and a completion answered %d (%v)", status, err)
	}
	c, err := wire.DecodeResponse(resp)
	if err != nil || c.Usage == nil || c.Usage.PromptTokens <= 0 {
		return 0, fmt.Errorf("no /tokenize, and no usage in the completion")
	}
	return c.Usage.PromptTokens, nil
}
