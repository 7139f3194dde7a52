package status

import (
	"bytes"
	"fmt"
	"html/template"
	"strings"
	"time"

	"github.com/slogate/slogate/report"
	"github.com/slogate/slogate/schedule"
	"github.com/slogate/slogate/synth"
)

// The probe and calibration sections: their schedules' state, and the latest results
// drawn by package report's figures (the heatmap of a probe matrix, the rate-scan charts
// of a scan probe and of each calibrated tier).

// probePart is the probe section.
type probePart struct {
	Off      bool   // the sidecar does not probe
	Workload string //
	State    string // the schedule, in words
	Report   bool   // a probe has finished
	Finished string
	Model    string
	Kind     string
	Cells    int
	Gate     string
	Figure   template.HTML // the heatmap, or a scan's charts
}

func probeView(src ProbeSource, now time.Time) probePart {
	if src == nil {
		return probePart{Off: true}
	}
	p := src.Probe()
	v := probePart{Workload: p.Workload, State: scheduleState(p.Status, now, "probe")}
	if p.Report == nil {
		return v
	}
	r := *p.Report
	v.Report, v.Finished, v.Model, v.Kind, v.Cells = true, fmtTime(r.Finished, now), r.Model, string(r.Workload.Kind), len(r.Cells)
	v.Gate = gateSummary(r.Gate)
	var fig bytes.Buffer
	if r.Workload.Kind == synth.Scan {
		_ = report.WriteScanCharts(&fig, r, "probe-") // a bytes.Buffer does not fail
	} else {
		_ = report.WriteHeatmap(&fig, r)
	}
	v.Figure = template.HTML(fig.String()) // report escapes every text it writes
	return v
}

// gateSummary counts the functional gate's verdicts.
func gateSummary(checks []synth.Check) string {
	if len(checks) == 0 {
		return "not run"
	}
	n := map[synth.Verdict]int{}
	for _, c := range checks {
		n[c.Verdict]++
	}
	s := fmt.Sprintf("%d passed, %d failed", n[synth.Pass], n[synth.Fail])
	if k := n[synth.Skip]; k > 0 {
		s += fmt.Sprintf(", %d skipped", k)
	}
	return s
}

// calibrationPart is the calibration section.
type calibrationPart struct {
	Off      bool
	State    string
	Result   bool // a calibration has finished
	Finished string
	Applied  string
	Tiers    []calibrationTier
}

// calibrationTier is one tier's curve, knee and limits.
type calibrationTier struct {
	Name, ID string
	Knee     string
	Rule     string
	Limits   string
	Err      string
	Figure   template.HTML
}

func calibrationView(src CalibrationSource, now time.Time) calibrationPart {
	if src == nil {
		return calibrationPart{Off: true}
	}
	c := src.Calibration()
	v := calibrationPart{State: scheduleState(c.Status, now, "calibration")}
	if c.Outcome == nil {
		return v
	}
	o := *c.Outcome
	v.Result, v.Finished = true, fmtTime(o.Result.Finished, now)
	switch {
	case o.Applied:
		v.Applied = "in force"
	case o.ApplyErr != "":
		v.Applied = "not applied: " + o.ApplyErr
	default:
		v.Applied = "published for review, not applied"
	}
	limits := map[string]string{}
	for _, t := range o.Calibrated() {
		limits[t.Name] = fmt.Sprintf("rate %s req/s, burst %d, in flight %d–%d, queue %d",
			fmtNum(t.Rate), t.Burst, t.MinInFlight, t.MaxInFlight, t.MaxQueue)
	}
	reports := o.Result.Reports() // one per tier, in order
	for i, t := range o.Result.Tiers {
		ct := calibrationTier{Name: t.Tier, ID: token(t.Tier), Knee: "none", Rule: t.Rule, Limits: limits[t.Tier], Err: t.Err}
		if t.Knee >= 0 && t.KneeRate > 0 {
			ct.Knee = fmtNum(t.KneeRate) + " req/s"
		}
		if i < len(reports) {
			ct.Figure = tierFigure(reports[i], "cal-"+ct.ID+"-")
		}
		v.Tiers = append(v.Tiers, ct)
	}
	return v
}

func tierFigure(r synth.Report, prefix string) template.HTML {
	var fig bytes.Buffer
	_ = report.WriteScanCharts(&fig, r, prefix)
	return template.HTML(fig.String()) // report escapes every text it writes
}

// scheduleState describes a schedule's state in words.
func scheduleState(st schedule.Status, now time.Time, what string) string {
	var parts []string
	switch {
	case st.Running:
		parts = append(parts, "a "+what+" is running")
	case st.LastStart.IsZero():
		parts = append(parts, "no "+what+" has run yet")
	case st.LastErr != "":
		parts = append(parts, fmt.Sprintf("the last %s, started %s, did not complete: %s", what, fmtTime(st.LastStart, now), st.LastErr))
	default:
		parts = append(parts, fmt.Sprintf("the last %s ended %s", what, fmtTime(st.LastEnd, now)))
	}
	parts = append(parts, fmt.Sprintf("%d completed", st.Runs))
	if st.Held > 0 {
		parts = append(parts, fmt.Sprintf("%d held back by live traffic", st.Held))
	}
	return strings.Join(parts, "; ")
}

// token keeps the characters of s that may stand in an id: "Long ctx" → "longctx".
func token(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			return r
		}
		return -1
	}, strings.ToLower(s))
}
