// Package exporter turns what slogate measures into Prometheus metrics.
//
// It has four parts:
//
//   - Metrics (metrics.go, observe.go, models.go, tiers.go, tenants.go, decisions.go) holds every
//     metric definition, registered on a registry the caller passes in. It is the
//     proxy's Observer: each finished request's measure.Result updates the request
//     counter, the latency histograms (time to first token and end-to-end, both
//     including the wait in admission's queue; time per output token), the queue wait
//     histogram and the token counters; GapObserver feeds the inter-token gap histogram
//     as chunks arrive. It is also admission's DecisionObserver: ObserveDecision counts
//     every admission decision. Requests and decisions of a tenant are also counted per
//     tenant (tenants.go).
//   - Collectors read state at scrape time: the requests in flight (collectors.go), the
//     engine's Snapshot as engine-neutral gauges (engine.go), and admission control's
//     mode, engine state, per-tier limits and queues, each tenant's weight, budgets
//     and fair-share counters from the same reading of admission's Stats (tenants.go),
//     and tiers file reloads (admission.go); and the latest probe (probe.go) and calibration (calibration.go).
//     The GPU gauges, from NVIDIA DCGM through cgo, are package gpu's collector.
//   - Handler (handler.go) serves the registry as GET /metrics does; the admin listener
//     around it (health, readiness, TLS and basic auth) is the sidecar package's.
//   - Push (push.go) sends the registry's metrics periodically to a push endpoint such
//     as VictoriaMetrics' /api/v1/import/prometheus, for setups that are not scraped.
//
// Guarantees: every latency histogram has a bucket boundary exactly at its SLO
// threshold (Options.TTFT, Options.TPOT), so an SLI "good = bucket le=threshold" is exact;
// every label takes values from a bounded set — in particular the model label takes only
// the names the engine serves, and "other" for anything else, and the tier label at most
// MaxTierLabels tier names, NoTier and OtherTier, and the tenant label at most
// MaxTenantLabels names and "other". The metric reference is
// docs/metrics.md.
//
// The package imports measure, engine, admission and wire but not proxy: the small
// interfaces it needs (InFlightSource, EngineSource, AdmissionSource, ReloadSource)
// are declared here and satisfied by the engine scraper, admission's Controller (its
// ledger of requests in flight among them) and Reloader; its Clock is slogate's
// clock.Clock.
package exporter
