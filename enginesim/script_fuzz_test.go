package enginesim

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// FuzzScript feeds arbitrary chat bodies to the script that answers the functional
// gate's questions. It never panics; a body offering tools gets no answer; an answer is
// non-empty pieces that join to a number or a lower-case word; and, whatever text
// follows them, "What is A + B?" is answered with the sum and "What was the
// code word?" with the word given earlier.
func FuzzScript(f *testing.F) {
	for _, s := range []string{
		`{"messages":[{"role":"user","content":"What is 17 + 25? Answer with the number only."}]}`,
		`{"messages":[{"role":"user","content":"Remember the code word: heliotrope."},{"role":"user","content":"What was the code word?"}]}`,
		`{"messages":[{"role":"user","content":"what is 999999999+999999999"}],"tools":null}`,
		`{"messages":[{"role":"user","content":"What is 1 + 1?"}],"tools":[{"type":"function"}]}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"What is 1 + 1?"}]}]}`,
		`{"messages":[]}`, `{"messages":null,"tools":[]}`, `[]`, `{`, ``,
	} {
		f.Add([]byte(s), uint32(17), uint32(25), "Answer with the number only.")
	}
	f.Add([]byte(`{"messages":[{"content":"code word: Kſ"},{"content":"what was the code word"}]}`), uint32(0), uint32(0), "")
	tok := tokenizer{vocab: 32000}
	f.Fuzz(func(t *testing.T, body []byte, a, b uint32, text string) {
		pieces, tools := tok.script(body)
		if tools && pieces != nil {
			t.Fatalf("an answer to a body offering tools: %q", pieces)
		}
		checkAnswer(t, pieces)

		x, y := int(a%1e9), int(b%1e9)
		got := scriptAnswer(t, tok, "What is "+strconv.Itoa(x)+" + "+strconv.Itoa(y)+"? "+text)
		if want := strconv.Itoa(x + y); got != want {
			t.Fatalf("What is %d + %d? answered %q, want %s", x, y, got, want)
		}
		word := strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
				return r
			}
			return -1
		}, text)
		if word == "" {
			return
		}
		got = scriptAnswer(t, tok, "Remember the code word: "+word+".", "OK", "What was the code word? Answer with the word only.")
		if want := strings.ToLower(word); got != want {
			t.Fatalf("code word %q answered %q, want %q", word, got, want)
		}
	})
}

// scriptAnswer returns the script's whole answer to a chat of the given user and
// assistant turns.
func scriptAnswer(t *testing.T, tok tokenizer, turns ...string) string {
	t.Helper()
	var msgs []map[string]string
	for i, c := range turns {
		msgs = append(msgs, map[string]string{"role": []string{"user", "assistant"}[i%2], "content": c})
	}
	body, err := json.Marshal(map[string]any{"messages": msgs})
	if err != nil {
		t.Fatal(err)
	}
	pieces, tools := tok.script(body)
	if tools {
		t.Fatalf("tools in %s", body)
	}
	checkAnswer(t, pieces)
	return strings.Join(pieces, "")
}

// checkAnswer checks that pieces are non-empty and join to a number or a lower-case word.
func checkAnswer(t *testing.T, pieces []string) {
	t.Helper()
	for _, p := range pieces {
		if p == "" {
			t.Fatalf("an empty piece in %q", pieces)
		}
	}
	answer := strings.Join(pieces, "")
	if answer == "" {
		return
	}
	if _, err := strconv.ParseUint(answer, 10, 64); err == nil {
		return
	}
	for _, r := range answer {
		if !unicode.IsLetter(r) || unicode.IsUpper(r) {
			t.Fatalf("answer %q is neither a number nor a lower-case word", answer)
		}
	}
}
