package exporter

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/wire"
)

// Metrics has the method set of proxy.Observer, which exporter may not import.
var _ interface {
	Observe(req wire.Request, res measure.Result)
} = (*Metrics)(nil)

// Observe records one finished request. It is called once per request, after its
// response ended, on the request's goroutine; it is safe for concurrent use, never
// blocks on I/O, and once a (model, tier) pair's series exist it allocates nothing.
//
// The tier label is res.Tier, NoTier when it is empty (admission off, or the request
// never reached it), OtherTier past MaxTierLabels distinct names. What it records:
//   - slogate_requests_total, always;
//   - on the three latency histograms, the request's trace id as an exemplar (label
//     trace_id) when res.TraceID is set, which OpenMetrics scrapes carry;
//   - time to first token as the client felt it, res.QueueWait + res.TTFT, for streams
//     that ended OK with output: the requests and the TTFT an SLO judges
//     (measure.ClientLatency), so that the bucket at a tier's SLO counts the requests
//     measure.SLO.MetByClient would find within it;
//   - time per output token, for those of them with at least two output tokens
//     (res.TPOT > 0);
//   - end-to-end duration as the client felt it, res.QueueWait + res.E2E, for requests
//     that ended OK, streaming or not;
//   - the queue wait, for requests admission classified (res.Tier set) and dispatched
//     (outcome not Rejected), whatever else the outcome;
//   - every gap in res.Gaps, whatever the outcome (callers that keep gaps; a caller that
//     feeds GapObserver instead must not also keep them, or gaps count twice);
//   - prompt and output tokens, whatever the outcome, when the result has them;
//   - when res.Tenant is set (the tiers file has a tenants section), the slogate_tenant_*
//     request, token and queue wait series under its tenant (MaxTenantLabels bounds the
//     names), and whether an SLO judged it and it met its tier's SLO
//     (measure.SLO.MetByClient).
func (m *Metrics) Observe(req wire.Request, res measure.Result) {
	s := m.models.lookup(req.Model)
	e := m.tiers.lookup(res.Tier)
	s.request(&res, e).Inc()
	if res.Outcome == measure.OK {
		ts := s.tier(e)
		var ex prometheus.Labels // the exemplar of a request whose trace is exported
		if res.TraceID != "" {
			ex = prometheus.Labels{labelTraceID: res.TraceID}
		}
		if ttft, tpot, judged := measure.ClientLatency(res); judged {
			observe(ts.ttft, seconds(ttft), ex)
			if tpot > 0 {
				observe(ts.tpot, seconds(tpot), ex)
			}
		}
		observe(ts.e2e, seconds(res.QueueWait+res.E2E), ex)
	}
	if judged, met := m.judge(&res); judged {
		e.judged.Inc()
		if met {
			e.met.Inc()
		}
	}
	if e.queueWait != nil && res.Outcome != measure.Rejected {
		e.queueWait.Observe(seconds(res.QueueWait))
	}
	for _, g := range res.Gaps {
		s.gap.Observe(seconds(g))
	}
	if res.InputTokens > 0 {
		s.prompt.Add(float64(res.InputTokens))
	}
	if res.OutputTokens > 0 && res.Tokens != measure.TokensNone {
		s.generatedBy(res.Tokens).Add(float64(res.OutputTokens))
	}
	m.observeTenant(&res)
}

// labelTraceID is the exemplar label that carries a trace id: the name Grafana's
// Prometheus data source looks for by default.
const labelTraceID = "trace_id"

// observe records v in o, with the exemplar ex when there is one.
func observe(o prometheus.Observer, v float64, ex prometheus.Labels) {
	if ex != nil {
		if eo, ok := o.(prometheus.ExemplarObserver); ok {
			eo.ObserveWithExemplar(v, ex)
			return
		}
	}
	o.Observe(v)
}

// Judge reports whether an SLO judges res and, if so, whether res met its tier's SLO as
// its client saw it: the rule of slogate_slo_judged_requests_total and
// slogate_slo_met_requests_total. Safe for concurrent use; it allocates nothing.
func (m *Metrics) Judge(res measure.Result) (judged, met bool) { return m.judge(&res) }

// GapObserver returns a function that records one inter-token gap of req in
// slogate_inter_token_gap_seconds, for measure.Options.OnGap, so gaps are recorded as
// they happen without the recorder keeping them. The gap histogram has no tier label:
// the proxy asks for the function before admission has classified the request. The
// model is resolved once, when GapObserver is called; the function returned is safe
// for concurrent use and allocates nothing. GapObserver itself allocates nothing
// either.
func (m *Metrics) GapObserver(req wire.Request) func(time.Duration) {
	return m.models.lookup(req.Model).observeGap
}

// Model returns the model label value a request's model name is recorded under: the
// name itself if the engine serves it, the only served model for an empty name when
// exactly one is served, else OtherModel. Safe for concurrent use.
func (m *Metrics) Model(name string) string {
	return m.models.lookup(name).name
}
