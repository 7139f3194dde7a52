package exporter

import (
	"strings"
	"testing"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/clock"
	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/wire"
)

// TestTierSLOCounters: slogate_slo_judged_requests_total and slogate_slo_met_requests_total
// count by tier what the tenant counters count by tenant — the streams that ended ok with
// output, and of those the ones within their tier's SLO, queue wait included — and every
// tier in force has both series at zero before its first request.
func TestTierSLOCounters(t *testing.T) {
	judged := func(tier string) string { return `slogate_slo_judged_requests_total{tier="` + tier + `"}` }
	met := func(tier string) string { return `slogate_slo_met_requests_total{tier="` + tier + `"}` }
	ctrl := newTenantController(t, admission.Enforce, clock.NewFake(time.Unix(1, 0)), testTenants())
	m, reg := newMetrics(t, Options{ServedModels: served("llama"), TTFT: 1500 * time.Millisecond, Admission: ctrl})

	got := exposed(t, reg, "slogate_slo_")
	for _, tier := range []string{"short", "medium", "long", "xlong", NoTier} {
		if v, ok := got[judged(tier)]; !ok || v != 0 {
			t.Errorf("before any request: %s = %v (exported %v), want 0", judged(tier), v, ok)
		}
		if v, ok := got[met(tier)]; !ok || v != 0 {
			t.Errorf("before any request: %s = %v (exported %v), want 0", met(tier), v, ok)
		}
	}

	for _, res := range []measure.Result{
		// short's own TTFT SLO is 1 s: 0.8 s + 0.5 s of queue misses it, 0.8 s alone meets it
		tenantStream,
		with(tenantStream, func(r *measure.Result) { r.QueueWait = 0 }),
		// long takes the sidecar's 2 s: 1.3 s meets it, a TPOT of 150 ms misses its 100 ms
		with(tenantStream, func(r *measure.Result) { r.Tier = "long" }),
		with(tenantStream, func(r *measure.Result) { r.Tier, r.TPOT = "long", 150*time.Millisecond }),
		// not classified: judged by the sidecar's 1.5 s, under the "none" tier
		with(tenantStream, func(r *measure.Result) { r.Tier, r.QueueWait = "", 0 }),
		// not judged: rejected, failed, not streamed, no output
		with(tenantStream, func(r *measure.Result) { r.Outcome, r.Status = measure.Rejected, 429 }),
		with(tenantStream, func(r *measure.Result) { r.Outcome = measure.EngineError }),
		with(tenantStream, func(r *measure.Result) { r.Stream = false }),
		with(tenantStream, func(r *measure.Result) { r.OutputChunks = 0 }),
	} {
		m.Observe(wire.Request{Route: res.Route, Model: "llama", Stream: res.Stream}, res)
	}
	got = exposed(t, reg, "slogate_slo_")
	for k := range got {
		if !strings.HasPrefix(k, "slogate_slo_") {
			delete(got, k)
		}
	}
	checkNonZero(t, got, map[string]float64{
		judged("short"): 2, met("short"): 1,
		judged("long"): 2, met("long"): 1,
		judged(NoTier): 1, met(NoTier): 1,
	})
}
