// Package enginesim is a model of an LLM inference engine (vLLM or SGLang) for tests,
// demos and benchmarks: it runs no model and needs no GPU.
//
// Scheduler is the core, modelled on vLLM's v1 scheduler: continuous batching, an FCFS
// waiting queue, chunked prefill under a per-step token budget, a block KV cache with
// prefix caching, preemption by recompute and speculative decoding. The duration of each
// step comes from a Profile's cost model, calibrated to published benchmarks (the
// figures are in docs/simulator.md, "Published figures") and documented where each
// profile is defined. The Scheduler takes the time as an argument and never reads a
// clock, so tests drive it in virtual time.
//
// Server puts the Scheduler behind the engines' HTTP API in real time: completions and
// chat (streaming or not), /v1/models, /tokenize, /health, /metrics with either engine's
// metric names, the engines' own admission caps (Config.MaxNumQueuedReqs,
// MaxNumQueuedTokens, MaxQueuedRequests; caps.go), vLLM's request spans (Config.Tracer;
// trace.go), and deliberate faults (see Faults) for testing what sits in front of it.
package enginesim
