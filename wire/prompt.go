package wire

const (
	msgPrompt      = "must be a string, an array of strings, an array of token ids or an array of arrays of token ids"
	msgTokenID     = "must be a token id (a non-negative integer)"
	msgString      = "must be a string"
	msgTokenIDList = "must be an array of token ids"
	msgObject      = "must be an object"
)

// promptKind is the kind of the elements of a list prompt, set by its first
// element.
type promptKind uint8

const (
	kindNone promptKind = iota
	kindStrings
	kindIDs
	kindIDLists
)

func isNumStart(c byte) bool { return c == '-' || c >= '0' && c <= '9' }

func kindOf(c byte) promptKind {
	switch {
	case c == '"':
		return kindStrings
	case c == '[':
		return kindIDLists
	case isNumStart(c):
		return kindIDs
	}
	return kindNone
}

func (k promptKind) msg() string {
	switch k {
	case kindStrings:
		return msgString
	case kindIDs:
		return msgTokenID
	case kindIDLists:
		return msgTokenIDList
	}
	return msgPrompt
}

// scanPrompt measures the "prompt" of a completions request (or a value of the
// same shape under another name, such as the "input" of an embeddings request or
// SGLang's "input_ids"): a string, a list of strings, a list of token ids or a
// list of token-id lists. has is false for null.
func scanPrompt(s *scanner, field string) (p PromptSize, has bool, err error) {
	switch s.peek() {
	case 'n':
		return p, false, s.literal("null")
	case '"':
		v, err := s.scanString()
		return PromptSize{TextBytes: v.n, Prompts: 1}, true, err
	case '[':
		p, err = scanPromptList(s, field)
		return p, true, err
	}
	s.invalid(field, msgPrompt)
	return p, true, s.skipValue()
}

func scanPromptList(s *scanner, field string) (p PromptSize, err error) {
	start := s.pos
	if err := s.enter(); err != nil {
		return p, err
	}
	kind := kindNone
	for i := 0; ; i++ {
		more, err := s.element(i)
		if err != nil {
			return p, err
		}
		if !more {
			break
		}
		c := s.peek()
		if kind == kindNone {
			kind = kindOf(c)
		}
		switch {
		case kind == kindStrings && c == '"':
			v, err := s.scanString()
			p.TextBytes, p.Prompts = p.TextBytes+v.n, p.Prompts+1
			if err != nil {
				return p, err
			}
		case kind == kindIDs && isNumStart(c):
			p.TokenIDs++
			err = tokenID(s, field, i, -1)
		case kind == kindIDLists && c == '[':
			n, err2 := scanIDList(s, field, i)
			p.TokenIDs, p.Prompts, err = p.TokenIDs+n, p.Prompts+1, err2
		default:
			s.invalidAt(s.pos, kind.msg(), "%s[%d]", field, i)
			err = s.skipValue()
		}
		if err != nil {
			return p, err
		}
	}
	switch kind {
	case kindIDs:
		p.Prompts = 1
	case kindNone:
		s.invalidOff(start, field, "must not be empty")
	}
	return p, nil
}

// scanIDList scans the i-th token-id list of a prompt and returns its length.
func scanIDList(s *scanner, field string, i int) (n int, err error) {
	if err := s.enter(); err != nil {
		return 0, err
	}
	for j := 0; ; j++ {
		more, err := s.element(j)
		if err != nil || !more {
			return n, err
		}
		if !isNumStart(s.peek()) {
			s.invalidAt(s.pos, msgTokenID, "%s[%d][%d]", field, i, j)
			if err := s.skipValue(); err != nil {
				return n, err
			}
			continue
		}
		n++
		if err := tokenID(s, field, i, j); err != nil {
			return n, err
		}
	}
}

// tokenID scans a number and records a field error unless it is a valid
// token id. j < 0 means the id is field[i], otherwise field[i][j].
func tokenID(s *scanner, field string, i, j int) error {
	at := s.pos
	num, isInt, err := s.scanNumber()
	if err != nil {
		return err
	}
	if _, ok := intValue(num, isInt); !ok {
		if j < 0 {
			s.invalidAt(at, msgTokenID, "%s[%d]", field, i)
		} else {
			s.invalidAt(at, msgTokenID, "%s[%d][%d]", field, i, j)
		}
	}
	return nil
}

// scanEmbeds reads "prompt_embeds" (vLLM): any non-null value counts as
// present; the engine validates it.
func scanEmbeds(s *scanner) (has bool, err error) {
	if s.peek() == 'n' {
		return false, s.literal("null")
	}
	return true, s.skipValue()
}

// scanMessages measures the "messages" of a chat request. has is false for
// null.
func scanMessages(s *scanner, field string) (p PromptSize, has bool, err error) {
	switch s.peek() {
	case 'n':
		return p, false, s.literal("null")
	case '[':
	default:
		s.invalid(field, "must be an array of message objects")
		return p, true, s.skipValue()
	}
	if err := s.enter(); err != nil {
		return p, true, err
	}
	for i := 0; ; i++ {
		more, err := s.element(i)
		if err != nil || !more {
			return p, true, err
		}
		p.Prompts++
		if err := scanMessage(s, field, i, &p); err != nil {
			return p, true, err
		}
	}
}

// scanMessage adds the content of messages[i] to p. Fields other than
// "content" are validated and skipped.
func scanMessage(s *scanner, field string, i int, p *PromptSize) error {
	if s.peek() != '{' {
		s.invalidAt(s.pos, msgObject, "%s[%d]", field, i)
		return s.skipValue()
	}
	if err := s.enter(); err != nil {
		return err
	}
	text, parts := 0, 0 // of the last "content" key
	for j := 0; ; j++ {
		key, more, err := s.member(j)
		if err != nil {
			return err
		}
		if !more {
			break
		}
		if string(s.name(key)) != "content" {
			err = s.skipValue()
		} else {
			text, parts, err = scanContent(s, field, i)
		}
		if err != nil {
			return err
		}
	}
	p.TextBytes += text
	p.Parts += parts
	return nil
}

// scanContent measures messages[i].content: a string, null or a list of
// content parts.
func scanContent(s *scanner, field string, i int) (text, parts int, err error) {
	switch s.peek() {
	case '"':
		v, err := s.scanString()
		return v.n, 0, err
	case 'n':
		return 0, 0, s.literal("null")
	case '[':
		return scanParts(s, field, i)
	}
	s.invalidAt(s.pos, "must be a string, null or an array of content parts", "%s[%d].content", field, i)
	return 0, 0, s.skipValue()
}

func scanParts(s *scanner, field string, i int) (text, parts int, err error) {
	if err := s.enter(); err != nil {
		return 0, 0, err
	}
	for j := 0; ; j++ {
		more, err := s.element(j)
		if err != nil || !more {
			return text, parts, err
		}
		n, isText, err := scanPart(s, field, i, j)
		if err != nil {
			return text, parts, err
		}
		if isText {
			text += n
		} else {
			parts++
		}
	}
}

// partType is what the "type" of a content part says.
type partType uint8

const (
	partUntyped partType = iota
	partText
	partOther
)

// scanPart reads messages[i].content[j]. A part is text when its type is
// "text" or "input_text", or when it has no type but a string "text"; any
// other part (image_url, input_audio, ...) is a non-text part.
func scanPart(s *scanner, field string, i, j int) (n int, isText bool, err error) {
	if s.peek() != '{' {
		s.invalidAt(s.pos, msgObject, "%s[%d].content[%d]", field, i, j)
		return 0, false, s.skipValue()
	}
	start := s.pos
	if err := s.enter(); err != nil {
		return 0, false, err
	}
	typ, textLen := partUntyped, -1
	for k := 0; ; k++ {
		key, more, err := s.member(k)
		if err != nil {
			return 0, false, err
		}
		if !more {
			break
		}
		switch string(s.name(key)) {
		case "type":
			typ, err = scanPartType(s, field, i, j)
		case "text":
			textLen = -1
			if s.peek() == '"' {
				var v str
				v, err = s.scanString()
				textLen = v.n
			} else {
				err = s.skipValue()
			}
		default:
			err = s.skipValue()
		}
		if err != nil {
			return 0, false, err
		}
	}
	switch {
	case typ == partText && textLen < 0:
		s.invalidAt(start, `must have a string "text"`, "%s[%d].content[%d]", field, i, j)
		return 0, true, nil
	case typ == partText, typ == partUntyped && textLen >= 0:
		return textLen, true, nil
	}
	return 0, false, nil
}

func scanPartType(s *scanner, field string, i, j int) (partType, error) {
	if s.peek() != '"' {
		s.invalidAt(s.pos, msgString, "%s[%d].content[%d].type", field, i, j)
		return partOther, s.skipValue()
	}
	v, err := s.scanString()
	if err != nil {
		return partOther, err
	}
	switch string(s.name(v)) {
	case "text", "input_text":
		return partText, nil
	}
	return partOther, nil
}
