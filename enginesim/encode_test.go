package enginesim

import (
	"fmt"
	"testing"

	"github.com/slogate/slogate/wire"
)

// TestTokenChunkMatchesWire holds the hand-written token chunk to the bytes the wire
// types encode to, for every shape the simulator streams.
func TestTokenChunkMatchesWire(t *testing.T) {
	texts := []string{" the", "", "quote \" backslash \\ newline \n tab \t bell \x07 <&> é"}
	for _, chat := range []bool{false, true} {
		for _, reasoning := range []bool{false, true} {
			for _, finish := range []string{"", "length", "stop"} {
				for _, usage := range []bool{false, true} {
					for _, text := range texts {
						if reasoning && !chat {
							continue
						}
						name := fmt.Sprintf("chat=%v/reasoning=%v/finish=%q/usage=%v/%q", chat, reasoning, finish, usage, text)
						t.Run(name, func(t *testing.T) {
							a := &answer{j: &job{model: `m"odel`, seed: 42, created: 1700000000, prompt: 7}, chat: chat, sent: 3}
							got := string(a.appendTokenChunk(nil, text, reasoning, finish, usage))
							want := string(wireTokenChunk(a, text, reasoning, finish, usage))
							if got != want {
								t.Errorf("hand-written chunk differs from the wire encoding:\n got %s\nwant %s", got, want)
							}
						})
					}
				}
			}
		}
	}
}

// wireTokenChunk builds the same chunk from the wire types and encodes it as event does.
func wireTokenChunk(a *answer, text string, reasoning bool, finish string, usage bool) []byte {
	c := wire.Chunk{Object: "text_completion", Created: a.j.created, Model: a.j.model, ID: "cmpl-" + a.j.hexID()}
	choice := wire.Choice{Text: text}
	if a.chat {
		c.Object, c.ID = "chat.completion.chunk", "chatcmpl-"+a.j.hexID()
		d := &wire.Delta{Content: &text}
		if reasoning {
			d = &wire.Delta{ReasoningContent: &text}
		}
		choice = wire.Choice{Delta: d}
	}
	if finish != "" {
		choice.FinishReason = &finish
	}
	c.Choices = []wire.Choice{choice}
	if usage {
		c.Usage = &wire.Usage{PromptTokens: a.j.prompt, CompletionTokens: a.sent, TotalTokens: a.j.prompt + a.sent}
	}
	b := &answer{}
	b.event(c)
	return b.buf
}
