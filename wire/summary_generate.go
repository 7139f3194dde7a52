package wire

// ScanGenerate summarises one event of SGLang's native /generate stream, or its whole
// non-streaming answer, as SGLang writes them (python/sglang/srt/entrypoints/http_server.py,
// generate_request: `data: <JSON>` events ended by `data: [DONE]`, and
// `data: {"error": {"message": ...}}` when generation raised;
// python/sglang/srt/managers/tokenizer_manager.py, _handle_batch_output): each event is
// {"text", "output_ids", "meta_info": {"id", "finish_reason", "prompt_tokens",
// "completion_tokens", "cached_tokens", "e2e_latency", ...}}.
//
// The text is the whole answer so far (with --incremental-streaming-output, only the
// new text), and the token counts are running totals, so the summary is Cumulative:
// OutputBytes is the length of "text" and Usage holds meta_info's prompt_tokens,
// completion_tokens (HasUsage when either count is present), and CachedTokens its
// cached_tokens.
// FinishReason is meta_info.finish_reason.type ("stop", "length", "abort"; null while
// generating); an "abort" finish (the scheduler aborted the request: its message and
// status_code ride along) is an error, as are an "error" member that is not null and
// "object": "error". A batch answer (a JSON array) fails with ErrUnexpectedShape.
func ScanGenerate(data []byte) (ChunkSummary, error) { return ScanFor(RouteGenerate, data) }

func (c *ChunkSummary) scanGenerate(s *scanner) error {
	if s.peek() != '{' {
		return shapeError("not a JSON object")
	}
	if err := s.enter(); err != nil {
		return err
	}
	for i := 0; ; i++ {
		key, more, err := nextKey(s, i)
		if err != nil || !more {
			return err
		}
		switch string(key) {
		case "text":
			var v str
			v, err = optStr(s, "text")
			c.OutputBytes = v.n
		case "meta_info":
			err = c.metaInfo(s)
		case "error", "object":
			err = c.topField(s, key)
		default:
			err = s.skipValue()
		}
		if err != nil {
			return err
		}
	}
}

// metaInfo reads the meta_info object of a /generate answer.
func (c *ChunkSummary) metaInfo(s *scanner) error {
	if s.peek() == 'n' {
		return s.literal("null")
	}
	if s.peek() != '{' {
		return shapeError(`"meta_info" is not an object`)
	}
	if err := s.enter(); err != nil {
		return err
	}
	for i := 0; ; i++ {
		key, more, err := nextKey(s, i)
		if err != nil {
			return err
		}
		if !more {
			break
		}
		switch string(key) {
		case "prompt_tokens":
			c.HasUsage = true
			err = optCount(s, &c.Usage.PromptTokens)
		case "completion_tokens":
			c.HasUsage = true
			err = optCount(s, &c.Usage.CompletionTokens)
		case "cached_tokens":
			err = optCount(s, &c.CachedTokens)
		case "finish_reason":
			err = c.generateFinish(s)
		default:
			err = s.skipValue()
		}
		if err != nil {
			return err
		}
	}
	c.Usage.TotalTokens = c.Usage.PromptTokens + c.Usage.CompletionTokens
	return nil
}

// generateFinish reads meta_info.finish_reason: null, or an object whose "type" is the
// reason ({"type": "length", "length": 16}, {"type": "stop", "matched": ...},
// {"type": "abort", "message": ..., "status_code": ...}).
func (c *ChunkSummary) generateFinish(s *scanner) error {
	switch s.peek() {
	case 'n':
		return s.literal("null")
	case '{':
	default:
		return shapeError(`"finish_reason" is not an object`)
	}
	if err := s.enter(); err != nil {
		return err
	}
	for i := 0; ; i++ {
		key, more, err := nextKey(s, i)
		if err != nil || !more {
			return err
		}
		if string(key) != "type" {
			if err := s.skipValue(); err != nil {
				return err
			}
			continue
		}
		v, err := optStr(s, "finish_reason.type")
		if err != nil {
			return err
		}
		if v.raw != nil {
			c.FinishReason = finishReason(v)
			c.IsError = c.IsError || c.FinishReason == "abort"
		}
	}
}
