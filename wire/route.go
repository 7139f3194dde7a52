package wire

// Route is the engine endpoint a request was sent to. Its String form is a bounded
// metric label value.
type Route uint8

// The routes slogate measures. Generation routes produce output tokens; pooling routes
// (embeddings, pooling, score, rerank, classify) take input only and answer at once.
const (
	RouteUnknown         Route = iota // any other path
	RouteCompletions                  // POST /v1/completions
	RouteChatCompletions              // POST /v1/chat/completions
	RouteResponses                    // POST /v1/responses (vLLM's Responses API)
	RouteGenerate                     // POST /generate (SGLang's native API)
	RouteEmbeddings                   // POST /v1/embeddings
	RoutePooling                      // POST /pooling (vLLM)
	RouteScore                        // POST /score, /v1/score
	RouteRerank                       // POST /rerank, /v1/rerank, /v2/rerank
	RouteClassify                     // POST /classify
	numRoutes
)

// routePaths maps the exact paths the engines serve to their routes: vLLM's routers
// (vllm/entrypoints/openai/*/api_router.py, vllm/entrypoints/openai/responses/api_router.py,
// vllm/entrypoints/pooling/{embed,pooling,score,classify}/api_router.py) and SGLang's
// (python/sglang/srt/entrypoints/http_server.py: /generate, /classify, /v1/embeddings,
// /v1/score, /v1/rerank).
var routePaths = map[string]Route{
	"/v1/completions":      RouteCompletions,
	"/v1/chat/completions": RouteChatCompletions,
	"/v1/responses":        RouteResponses,
	"/generate":            RouteGenerate,
	"/v1/embeddings":       RouteEmbeddings,
	"/pooling":             RoutePooling,
	"/score":               RouteScore,
	"/v1/score":            RouteScore,
	"/rerank":              RouteRerank,
	"/v1/rerank":           RouteRerank,
	"/v2/rerank":           RouteRerank,
	"/classify":            RouteClassify,
}

var routeNames = [numRoutes]string{
	"other", "completions", "chat_completions", "responses", "generate",
	"embeddings", "pooling", "score", "rerank", "classify",
}

// RouteOf maps a URL path to its Route. It matches the exact paths listed with the
// routes (no trailing slash, no prefix); everything else is RouteUnknown.
func RouteOf(path string) Route { return routePaths[path] }

// String returns the route's label value: "completions", "chat_completions",
// "responses", "generate", "embeddings", "pooling", "score", "rerank", "classify", or
// "other".
func (r Route) String() string {
	if r < numRoutes {
		return routeNames[r]
	}
	return "other"
}

// Routes lists every known route (not RouteUnknown), for pre-creating series and
// for tests.
func Routes() []Route {
	out := make([]Route, 0, numRoutes-1)
	for r := RouteCompletions; r < numRoutes; r++ {
		out = append(out, r)
	}
	return out
}

// Generates reports whether the route produces output tokens (completions, chat,
// responses, generate), as opposed to a pooling route, which only reads its input.
func (r Route) Generates() bool {
	switch r {
	case RouteCompletions, RouteChatCompletions, RouteResponses, RouteGenerate:
		return true
	}
	return false
}

// OpenAIStream reports whether the route streams OpenAI chunks
// (`data: {"choices": ...}` ... `data: [DONE]`) whose usage report slogate may ask
// for with stream_options: /v1/completions and /v1/chat/completions only.
func (r Route) OpenAIStream() bool {
	return r == RouteCompletions || r == RouteChatCompletions
}
