package enginesim

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
)

// The simulator runs no model, but a functional gate (slogate probe's, see
// docs/simulator.md) asks a few questions before it loads an engine. So that the simulator can stand in for
// an engine there, it answers exactly these, and nothing else, correctly:
//
//   - "What is A + B?" (whole numbers): the sum;
//   - "What was the code word?" after an earlier message holding "code word: W": W.
//
// Every other prompt gets generated filler. Requests that offer tools get 400: the
// simulated engine has no tool parser, as an engine started without one.

var (
	sumQuestion  = regexp.MustCompile(`(?i)what is (\d{1,9}) *\+ *(\d{1,9})`)
	codeWord     = regexp.MustCompile(`(?i)code word:? *([a-z]+)`)
	codeQuestion = regexp.MustCompile(`(?i)what was the code word`)
)

// chatScript holds what the script needs of a chat request.
type chatScript struct {
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools json.RawMessage `json:"tools"`
}

// script returns the scripted answer to a chat body as output pieces (nil when the body
// asks nothing the script knows), and whether the body offers tools.
func (t tokenizer) script(body []byte) (pieces []string, tools bool) {
	var c chatScript
	if json.Unmarshal(body, &c) != nil || len(c.Messages) == 0 {
		return nil, false
	}
	if len(c.Tools) > 0 && string(c.Tools) != "null" && string(c.Tools) != "[]" {
		return nil, true
	}
	var texts []string
	for _, m := range c.Messages {
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			texts = append(texts, s)
		}
	}
	if len(texts) == 0 {
		return nil, false
	}
	last := texts[len(texts)-1]
	answer := ""
	if m := sumQuestion.FindStringSubmatch(last); m != nil {
		a, _ := strconv.Atoi(m[1])
		b, _ := strconv.Atoi(m[2])
		answer = strconv.Itoa(a + b)
	} else if codeQuestion.MatchString(last) {
		for _, s := range texts[:len(texts)-1] {
			if m := codeWord.FindStringSubmatch(s); m != nil {
				answer = strings.ToLower(m[1])
			}
		}
	}
	if answer == "" {
		return nil, false
	}
	t.pieces(answer, func(p string) { pieces = append(pieces, p) })
	return pieces, false
}
