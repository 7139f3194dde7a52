package status

import (
	"fmt"
	"html/template"
	"math"
	"strings"
	"time"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/engine"
	"github.com/slogate/slogate/measure"
)

// pageView is everything the template shows, formatted.
type pageView struct {
	Refresh     int // seconds
	Now         string
	Style       template.CSS
	Mode        string
	EngineState string
	Live        *livePart // nil: no live source
	Capacity    capacityPart
	Admission   []admissionRow
	Tenants     tenantPart
	Engine      enginePart
	Probe       probePart
	History     historyPart
	Calibration calibrationPart
}

// livePart is the live SLO table.
type livePart struct {
	Span string
	Rows []liveRow
	All  liveRow
}

// liveRow is one tier's recent traffic. Class fields are "good", "bad" or "".
type liveRow struct {
	Tier, ID                     string // ID: the tier as a data attribute value
	Requests, Judged, Attainment string
	AttainmentClass              string
	TTFT, TTFTSLO, TTFTClass     string
	TPOT, TPOTSLO, TPOTClass     string
	Failed, Rejected, Cancelled  string
}

// liveView lays out the live source's summary (LiveSource.Summary) over its span.
func liveView(byTier []Live, all Live, span time.Duration) *livePart {
	part := &livePart{Span: fmtSpan(span), All: liveRowOf(all, "all requests", "all")}
	for _, l := range byTier {
		name, id := l.Tier, l.Tier
		if name == "" {
			name, id = "not classified", "none"
		}
		part.Rows = append(part.Rows, liveRowOf(l, name, id))
	}
	return part
}

func liveRowOf(l Live, name, id string) liveRow {
	r := liveRow{
		Tier: name, ID: id,
		Requests: fmt.Sprint(l.Requests), Judged: fmt.Sprint(l.Judged),
		Attainment: fmtPct(l.Attainment),
		TTFT:       fmtDur(l.P95TTFT), TTFTSLO: fmtSLO(l.SLO.TTFT), TTFTClass: against(l.P95TTFT, l.SLO.TTFT, l.SLO.MetTTFT(l.P95TTFT)),
		TPOT: fmtDur(l.P95TPOT), TPOTSLO: fmtSLO(l.SLO.TPOT), TPOTClass: against(l.P95TPOT, l.SLO.TPOT, l.SLO.MetTPOT(l.P95TPOT)),
		Failed: fmt.Sprint(l.Failed), Rejected: fmt.Sprint(l.Rejected), Cancelled: fmt.Sprint(l.Cancelled),
		AttainmentClass: attainmentClass(l.Attainment),
	}
	return r
}

// attainmentClass classes an attainment against the goal: "" when it is unknown (NaN).
func attainmentClass(a float64) string {
	switch {
	case math.IsNaN(a):
		return ""
	case a >= attainmentGoal:
		return "good"
	}
	return "bad"
}

// attainmentGoal is the share of requests within SLO the SLOs promise (the alerting
// rules' 5% budget).
const attainmentGoal = 0.95

// against classes an observed p95 against its SLO bound, which met says whether it met:
// "" when either is unknown (0).
func against(p95 time.Duration, bound measure.Duration, met bool) string {
	switch {
	case p95 <= 0 || bound <= 0:
		return ""
	case met:
		return "good"
	}
	return "bad"
}

// admissionRow is one tier's limits and state.
type admissionRow struct {
	Tier, ID                   string
	Inputs                     string
	InFlight, Limit, Bounds    string
	Queued, QueueDetail        string
	MaxQueue, MaxWait          string
	Rate                       string
	FeedbackTTFT, FeedbackTPOT string
	ServiceRate                string
}

func admissionRows(st admission.Stats) []admissionRow {
	var out []admissionRow
	lower := 0
	for _, t := range st.Tiers {
		r := admissionRow{
			Tier: t.Name, ID: t.Name, Inputs: inputRange(lower, t.MaxInputTokens),
			InFlight: fmt.Sprint(t.InFlight), Limit: fmtNum(t.Limit), Bounds: fmt.Sprintf("%d–%d", t.MinInFlight, t.MaxInFlight),
			MaxQueue: fmt.Sprint(t.MaxQueue), MaxWait: fmtDur(t.MaxQueueWait), Rate: "none",
			FeedbackTTFT: fmtDur(t.P95TTFT), FeedbackTPOT: fmtDur(t.P95TPOT), ServiceRate: unknownDash,
		}
		var queued int
		var detail []string
		for _, c := range admission.Classes() {
			if int(c) < len(t.Queued) {
				queued += t.Queued[c]
				detail = append(detail, fmt.Sprintf("%s %d", c, t.Queued[c]))
			}
		}
		r.Queued, r.QueueDetail = fmt.Sprint(queued), strings.Join(detail, " · ")
		if t.Rate > 0 {
			r.Rate = fmt.Sprintf("%s req/s, burst %d", fmtNum(t.Rate), t.Burst)
		}
		if t.ServiceRate > 0 {
			r.ServiceRate = fmtNum(t.ServiceRate) + " req/s"
		}
		if t.MaxInputTokens > 0 {
			lower = t.MaxInputTokens + 1
		}
		out = append(out, r)
	}
	return out
}

// inputRange describes a tier's prompt sizes: from lower to max tokens (0: unbounded).
func inputRange(lower, max int) string {
	if max <= 0 {
		return fmt.Sprintf("≥ %d tokens", lower)
	}
	return fmt.Sprintf("%d–%d tokens", lower, max)
}

// engineState names admission's view of the engine.
func engineState(r admission.Reason) string {
	if r == admission.NoReason {
		return "ok"
	}
	return r.String()
}

// enginePart is the engine's snapshot.
type enginePart struct {
	Kind, Age, Err string
	Up             bool
	Fields         []field
}

type field struct{ Key, ID, Value string }

func engineView(s engine.Snapshot, now time.Time) enginePart {
	p := enginePart{Kind: s.Kind.String(), Up: s.Up, Age: "never scraped"}
	if !s.At.IsZero() {
		p.Age = fmtAge(now.Sub(s.At)) + " ago"
	}
	if s.Err != nil {
		p.Err = s.Err.Error()
	}
	ratio := func(v float64) string {
		if !engine.Known(v) {
			return unknownDash
		}
		return fmtPct(v)
	}
	count := func(v float64) string {
		if !engine.Known(v) {
			return unknownDash
		}
		return fmtNum(v)
	}
	models := strings.Join(s.Models, ", ")
	if models == "" {
		models = unknownDash
	}
	p.Fields = []field{
		{"Waiting requests", "waiting", count(s.Waiting)},
		{"Running requests", "running", count(s.Running)},
		{"KV cache in use", "kv-usage", ratio(s.KVUsage)},
		{"KV cache capacity", "kv-capacity", count(s.KVCapacityTokens) + " tokens"},
		{"Prefix cache hits", "prefix-hits", ratio(s.PrefixHitRatio)},
		{"Speculative acceptance", "spec-accept", ratio(s.SpecAcceptRate)},
		{"Preemptions", "preemptions", count(s.Preemptions)},
		{"Served models", "models", models},
	}
	if !engine.Known(s.KVCapacityTokens) {
		p.Fields[3].Value = unknownDash
	}
	return p
}
