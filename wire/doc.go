// Package wire reads and writes the OpenAI-compatible wire format that vLLM and
// SGLang speak.
//
// It has four parts, one per file:
//
//   - Route (route.go) names the endpoints slogate measures: completions, chat,
//     vLLM's Responses API, SGLang's native /generate, and the pooling routes.
//   - Inspect (inspect.go, inspect_routes.go, prompt.go, scan.go) reads a request
//     body of any of them in one pass, validates it as strict JSON and extracts
//     what a proxy needs to route, admit and measure it (model, stream, usage
//     options, max tokens, prompt size) without copying the prompt.
//   - SSEParser and SSEReader (sse.go, sse_reader.go) split a Server-Sent Events
//     stream into events incrementally and losslessly: the Raw bytes of every
//     event plus the pending bytes always reproduce the input exactly, so a proxy
//     can forward what it parsed byte for byte.
//   - Chunk (chunk.go) decodes stream chunks and non-streaming responses, and
//     encodes them in the shape vLLM produces. ScanChunk, ScanResponses,
//     ScanGenerate and ScanFor (summary*.go) summarise one event of each route's
//     stream without decoding it, for the hot path.
//   - APIError (apierror.go) reads and writes the OpenAI error JSON.
//
// wire is a leaf package: it knows nothing about HTTP servers, metrics or
// admission. It imports net/http only so that WriteError can write to a
// ResponseWriter.
//
// Errors are sentinels (ErrMalformed, ErrTooDeep, ErrInvalidField,
// ErrEventTooLarge, ErrUnexpectedShape) wrapped with the position of the fault;
// test for them with errors.Is.
//
// Concurrency: the functions of this package are safe for concurrent use. Its
// struct types (Request, Chunk, APIError, ...) are plain values without
// synchronization: safe to read from several goroutines, not to mutate while
// others read. SSEParser and SSEReader hold the state of one stream and are
// not safe for concurrent use.
package wire
