// Package gpu exports the state of the GPUs as Prometheus gauges (slogate_gpu_*), read
// from NVIDIA DCGM once per scrape.
//
// NewDCGMCollector is what slogate serve registers: it opens DCGM as the --dcgm setting
// says (ValidateDCGM lists the forms: off, embedded, or the address of a standalone
// nv-hostengine) and, when DCGM cannot be opened, still exports
// slogate_gpu_collector_up 0. NewCollector exports any Source; slogate demo passes one
// that models GPUs from the engine simulator.
//
// DCGM is loaded through cgo (github.com/NVIDIA/go-dcgm, which opens libdcgm.so.4 with
// dlopen), so reading it needs a build with cgo on Linux (dcgm.go, `//go:build cgo &&
// linux`); every other build (nodcgm.go) validates the setting the same way and reports
// DCGM unavailable. The rest of the package is pure Go. The metric reference is
// docs/metrics.md, "GPUs".
package gpu
