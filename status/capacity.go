package status

import (
	"math"
	"strings"

	"github.com/slogate/slogate/admission"
)

// The capacity section: each tier's recent load against the sustainable rate λ* its
// calibration measured (calibrate.Result.Knees) — the goodput as a share of λ*, which
// says how much of the measured capacity is in use, and the load offered as a multiple of
// λ*, the demand ratio the autoscaling examples of deploy/autoscaling scale replicas on.
//
// The load offered is every live request of the tier that ended in the window: admitted
// or turned away (admission's rejections reach the window as measure.Rejected, with the
// tier that refused them), cancelled or failed. So it counts the demand admission sheds,
// which neither the engine's queue nor the goodput shows; a request is counted when it
// ends, so the figure lags arrivals by the requests' latency. Requests no tier classified
// (refused before admission) are in no tier's row.

// SustainableSource is each tier's calibrated sustainable rate λ* in force, in requests
// per second by tier name; a tier without one is absent ((*sidecar.Sidecar).Sustainable).
type SustainableSource interface{ Sustainable() map[string]float64 }

// capacityPart is the capacity table.
type capacityPart struct {
	Span    string
	Rows    []capacityRow
	All     capacityRow
	Unknown string // the tiers in force without a λ*, comma-separated; "" when none
}

// capacityRow is one tier's load against its λ*. Class fields are "good", "bad" or "".
type capacityRow struct {
	Tier, ID    string
	Offered     string // requests/s
	Goodput     string // requests/s within both SLOs
	Knee        string // λ*, requests/s, or "unknown"
	InUse       string // goodput ÷ λ*
	Demand      string // offered ÷ λ*
	DemandClass string // "bad" above 1: more is asked than the engine sustains
	Note        string
}

// kneeUnknown is written for a tier without a λ*.
const kneeUnknown = "unknown"

// capacityView lays out the tiers in force, in order, with their recent traffic in live
// (Window.Summary's rows; nil: not measured) against their λ* in knees. The all-tiers
// row adds the tiers' shares: a request of tier t takes about 1/λ*ₜ of the engine's
// capacity (each λ* was measured with its tier alone on the engine), so the engine is
// at its knee when the shares sum to 1. Its shares are unknown while a tier with
// traffic has no λ*.
func capacityView(tiers []admission.TierStats, live []Live, knees map[string]float64, span string) capacityPart {
	byTier := make(map[string]Live, len(live))
	for _, l := range live {
		byTier[l.Tier] = l
	}
	p := capacityPart{Span: span, All: capacityRow{Tier: "all tiers", ID: "(all)", Knee: unknownDash}}
	offered, goodput, inUse, demand := 0.0, 0.0, 0.0, 0.0
	var unknown []string
	if live == nil {
		offered, goodput = math.NaN(), math.NaN()
	}
	for _, t := range tiers {
		r := capacityRow{Tier: t.Name, ID: t.Name, Knee: kneeUnknown}
		off, good := math.NaN(), math.NaN()
		if l, ok := byTier[t.Name]; ok {
			off, good = l.PerSecond(l.Requests), l.PerSecond(l.Met)
		}
		offered, goodput = offered+off, goodput+good
		r.Offered, r.Goodput = fmtRate(off), fmtRate(good)
		knee := knees[t.Name]
		if !(knee > 0) || math.IsInf(knee, 0) {
			unknown = append(unknown, t.Name)
			r.InUse, r.Demand = unknownDash, unknownDash
			r.Note = "λ* unknown: calibrate the tier"
			if off > 0 {
				inUse, demand = math.NaN(), math.NaN() // the tier's share is missing
			}
			p.Rows = append(p.Rows, r)
			continue
		}
		r.Knee, r.InUse, r.Demand = fmtRate(knee), fmtPct(good/knee), fmtRate(off/knee)
		r.DemandClass = demandClass(off / knee)
		if !math.IsNaN(good) {
			r.Note = "running at " + r.InUse + " of measured capacity"
		}
		inUse, demand = inUse+good/knee, demand+off/knee
		p.Rows = append(p.Rows, r)
	}
	a := &p.All
	a.Offered, a.Goodput = fmtRate(offered), fmtRate(goodput)
	a.InUse, a.Demand, a.DemandClass = unknownDash, unknownDash, ""
	switch {
	case math.IsNaN(offered):
	case len(unknown) == len(tiers):
		a.Note = "no tier has a λ*"
	case math.IsNaN(inUse):
		a.Note = "a tier with traffic has no λ*"
	default:
		a.InUse, a.Demand, a.DemandClass = fmtPct(inUse), fmtRate(demand), demandClass(demand)
		a.Note = "running at " + a.InUse + " of measured capacity"
	}
	p.Unknown = strings.Join(unknown, ", ")
	return p
}

// demandClass classes a demand ratio: "bad" above 1, when more is offered than the
// engine sustains within the SLOs; "" otherwise (and when unknown).
func demandClass(d float64) string {
	if d > 1 {
		return "bad"
	}
	return ""
}
