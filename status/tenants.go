package status

import (
	"fmt"
	"math"

	"github.com/slogate/slogate/admission"
	"github.com/slogate/slogate/measure"
)

// The tenants section: for each tenant of the tiers file, its weight and class ceiling,
// its requests open and queued, its share of the weighted service against its fair
// share, what is left of its budgets, and — with a live source — its recent requests,
// goodput and SLO attainment.

// noBudget stands for a budget the tenant does not have.
const noBudget = "—"

// tenantPart is the tenant table.
type tenantPart struct {
	Off  bool   // the tiers file has no tenants section
	Live bool   // the live columns are shown
	Span string // the live source's span
	// Identify says how requests are told apart, e.g. "header X-Tenant".
	Identify string
	Rows     []tenantRow
}

// tenantRow is one tenant, or one row of the live requests of no tenant in force
// (InForce false: only its live cells are set).
type tenantRow struct {
	Name, ID         string
	InForce          bool // the row is a tenant in force, with admission's state
	Weight, MaxClass string
	Open, Queued     string
	Served, Counter  string // its share of the weighted service; its virtual token counter
	Fair             string // its weight's share of the weights
	Budgets          []budgetCell
	Requests         string
	Rejected         string
	Goodput          string
	Attainment       string
	AttainmentClass  string
}

// budgetCell is one budget: "what is left / the limit", and when it is whole again.
type budgetCell struct{ ID, Text, Title string }

// tenantView lays out the tenants of st, with the recent traffic of live (nil: none),
// each request judged by its tier's SLO (def for tiers not in force).
func tenantView(st admission.Stats, live LiveSource, def measure.SLO) tenantPart {
	if st.Tenants == nil {
		return tenantPart{Off: true}
	}
	var service, weights float64
	names := make([]string, len(st.Tenants))
	for i, t := range st.Tenants {
		service += t.Service
		weights += t.Weight
		names[i] = t.Name
	}
	p := tenantPart{Live: live != nil, Identify: st.Identify}
	for _, t := range st.Tenants {
		r := tenantRow{
			Name: t.Name, ID: t.Name, InForce: true,
			Weight: fmtNum(t.Weight), MaxClass: t.MaxClass.String(),
			Open: fmt.Sprint(t.Open), Queued: fmt.Sprint(t.Queued),
			Served: fmtPct(t.Service / service), Counter: fmtNum(t.Counter), Fair: fmtPct(t.Weight / weights),
			Budgets: []budgetCell{
				allowanceCell("budget-requests", t.Quota.Requests),
				allowanceCell("budget-input-tokens", t.Quota.InputTokens),
				allowanceCell("budget-output-tokens", t.Quota.OutputTokens),
				concurrencyCell(t.Open, t.Budget.MaxConcurrent),
			},
		}
		p.Rows = append(p.Rows, r)
	}
	if live == nil {
		return p
	}
	p.Span = fmtSpan(live.Span())
	for i, l := range live.ByTenant(names, st.Tiers, def) {
		if i >= len(st.Tenants) { // the rows of no tenant in force follow the tenants'
			row := tenantRow{Name: "no tenant", ID: "(none)"}
			if l.Former {
				row = tenantRow{Name: "tenants no longer in force", ID: "(former)"}
			}
			p.Rows = append(p.Rows, row)
		}
		r := &p.Rows[i]
		r.Requests, r.Rejected = fmt.Sprint(l.Requests), fmt.Sprint(l.Rejected)
		r.Goodput = fmtRate(l.Goodput)
		r.Attainment, r.AttainmentClass = fmtPct(l.Attainment), attainmentClass(l.Attainment)
	}
	return p
}

// allowanceCell writes a per-minute budget as "left / limit", with when it is whole
// again; noBudget when there is none.
func allowanceCell(id string, a admission.Allowance) budgetCell {
	if !a.Set() {
		return budgetCell{ID: id, Text: noBudget, Title: "no budget"}
	}
	left := math.Floor(a.Remaining)
	c := budgetCell{ID: id, Text: fmtCount(left) + " / " + fmtCount(a.Limit), Title: fmt.Sprintf("%s of %s a minute left", fmtNum(left), fmtNum(a.Limit))}
	if a.Reset > 0 {
		c.Title += "; full again in " + fmtAge(a.Reset)
	}
	return c
}

// concurrencyCell writes the concurrency budget as "open / most"; noBudget when there
// is none.
func concurrencyCell(open, most int) budgetCell {
	if most <= 0 {
		return budgetCell{ID: "budget-concurrent", Text: noBudget, Title: "no budget"}
	}
	return budgetCell{ID: "budget-concurrent", Text: fmt.Sprintf("%d / %d", open, most), Title: "requests open / the most it may have"}
}
