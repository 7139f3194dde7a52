package enginesim

import "time"

// The built-in profiles. Each documents what it models and where its numbers come from;
// calibration_test.go checks them against the published figures they are fitted to.
func init() {
	register(h200Dense9B)
	register(h20x8Flash)
	register(tiny)
}

// h200Dense9B models a 9B dense model served by SGLang on one H200 NVL (141 GB), the
// deployment of the published context x concurrency matrix in docs/simulator.md
// ("H200 context matrix").
//
// Prefill is fitted to that matrix's single-request TTFT at 8K, 16K, 32K, 64K, 128K and
// 251K context: a fixed 0.28 s per request (the matrix measured prefill during decode
// warm-up, and its short contexts carry a cost that does not scale with length), 27K
// prompt tokens/s for the linear part, and an attention term quadratic in context. The fit
// stays within 14% of every measured TTFT. Decode is not measured in the matrix (every
// decode cell looped); its costs follow from streaming 18 GB of BF16 weights and ~150 KB
// of KV per token from HBM at 4.8 TB/s, about 6 ms per step at batch 1. The KV cache holds
// 1.8M tokens, which is inside the bounds the matrix implies: every run cell fits
// concurrency x (context + 4096 output), and every cell marked over capacity does not.
var h200Dense9B = Profile{
	Name:        "h200-9b",
	Description: "9B dense model, SGLang on 1x H200 NVL; prefill fitted to published TTFT at 8K-251K (docs/simulator.md)",
	Model:       "mimo-v2.6-distill-qwen-9b",

	MaxModelLen:      262144,
	MaxNumSeqs:       256,
	MaxBatchedTokens: 8192,
	BlockSize:        16,
	NumBlocks:        112500, // 1.8M tokens
	Vocab:            151936,

	Timing: Timing{
		StepBase:        0.006,
		PerPrefillToken: 1.0 / 27000,
		PerPrefillAttn:  9.25e-11,
		PerDecodeSeq:    60e-6,
		PerKVToken:      25e-9,
	},
	APILatency: 280 * time.Millisecond,
}

// h20x8Flash models a 309B MoE (about 15B active) served by SGLang on eight H20-3e, the
// deployment of the published arrival-rate scan in docs/simulator.md ("H20-3e rate
// scan"), over its 32K window.
//
// Fitted to two facts of that scan: closed-loop throughput of 8K-input/128-output
// requests at 32 concurrent is about 1.75 req/s (the scan's calibration point), and under
// open-loop arrivals the knee lies between 0.8x of that rate (p95 TTFT in single seconds
// over three minutes) and 1.1x (p95 TTFT past 20 s). Prefill dominates this shape, so the
// prompt-token rate sets the knee; decode cost grows with batch and resident KV, which is
// why throughput under overload falls a little below the closed-loop figure, as the
// scan's completion rate did (+19% for +37.5% offered).
var h20x8Flash = Profile{
	Name:        "h20x8-flash",
	Description: "309B MoE (15B active), SGLang on 8x H20-3e; knee fitted to a published rate scan (8K/128 at ~1.75 req/s; docs/simulator.md)",
	Model:       "mimo-v2.6-flash-rl",

	MaxModelLen:      32768,
	MaxNumSeqs:       128,
	MaxBatchedTokens: 2048,
	BlockSize:        16,
	NumBlocks:        125000, // 2M tokens
	Vocab:            152064,

	Timing: Timing{
		StepBase:        0.012,
		PerPrefillToken: 1.0 / 17500,
		PerPrefillAttn:  1e-10,
		PerDecodeSeq:    120e-6,
		PerKVToken:      10e-9,
		PerWaitingSeq:   0.8e-3,
	},
	APILatency: 20 * time.Millisecond,
}

// tiny is a small, fast engine for tests, the demo and benchmarks: short contexts,
// millisecond steps, room for thousands of concurrent streams. Its numbers model nothing.
var tiny = Profile{
	Name:        "tiny",
	Description: "small fast engine for tests and demos (4K context, ~2 ms steps); models no real deployment",
	Model:       "sim-tiny",

	MaxModelLen:      4096,
	MaxNumSeqs:       4096,
	MaxBatchedTokens: 16384,
	BlockSize:        16,
	NumBlocks:        131072, // 2M tokens
	Vocab:            32000,

	Timing: Timing{
		StepBase:        0.002,
		PerPrefillToken: 0.5e-6,
		PerDecodeSeq:    1e-6,
	},
}
