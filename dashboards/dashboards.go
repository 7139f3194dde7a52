// Package dashboards defines slogate's Grafana dashboards as Go code, with the Grafana
// Foundation SDK, and renders them to the JSON committed under dashboards/json: an SLO
// overview, a capacity dashboard and a synthetic-probes dashboard. Every panel has a
// description and a unit, every query reads only metrics slogate exports and filters by
// the namespace and pod template variables, and every rate takes $__rate_interval; the
// package's tests check all of it, and that the committed JSON is what the code renders.
//
// Regenerate the JSON after changing a dashboard:
//
//	go generate ./dashboards
package dashboards

//go:generate go run ./gen -out json

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// Tag is the tag of every slogate dashboard; the dashboards link to each other by it.
const Tag = "slogate"

// Spec is one dashboard: the file its JSON goes to and the function that builds it.
type Spec struct {
	File  string // file name under dashboards/json
	Build func() (dashboard.Dashboard, error)
}

// All returns every dashboard, in a fixed order.
func All() []Spec {
	return []Spec{
		{File: "overview.json", Build: Overview},
		{File: "capacity.json", Build: Capacity},
		{File: "probes.json", Build: Probes},
	}
}

// File is a rendered dashboard: its file name and its JSON.
type File struct {
	Name string
	Data []byte
}

// Render builds every dashboard and returns its JSON, in the order of All. The output
// depends only on the code: rendering twice gives the same bytes.
func Render() ([]File, error) {
	var out []File
	for _, s := range All() {
		d, err := s.Build()
		if err != nil {
			return nil, fmt.Errorf("dashboards: build %s: %w", s.File, err)
		}
		data, err := Marshal(d)
		if err != nil {
			return nil, fmt.Errorf("dashboards: marshal %s: %w", s.File, err)
		}
		out = append(out, File{Name: s.File, Data: data})
	}
	return out, nil
}

// Marshal returns d as indented JSON ending in a newline, with <, > and & left as they
// are (PromQL is easier to review that way). encoding/json sorts map keys, so the
// output is deterministic.
func Marshal(d dashboard.Dashboard) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(d); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// newDashboard starts a dashboard with the settings every slogate dashboard shares:
// its uid, the slogate tag, a link to the other slogate dashboards, a shared crosshair,
// the last three hours refreshed every 30 s, and the datasource, namespace and pod
// variables.
func newDashboard(uid, title, description string) *dashboard.DashboardBuilder {
	return dashboard.NewDashboardBuilder(title).
		Uid(uid).
		Description(description).
		Tags([]string{Tag}).
		Editable().
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Refresh("30s").
		Time("now-3h", "now").
		Timezone(common.TimeZoneBrowser).
		Link(dashboard.NewDashboardLinkBuilder("slogate").
			Type(dashboard.DashboardLinkTypeDashboards).
			Tags([]string{Tag}).
			AsDropdown(true).
			IncludeVars(true).
			KeepTime(true)).
		WithVariable(datasourceVariable()).
		WithVariable(namespaceVariable()).
		WithVariable(podVariable())
}

// build builds b and numbers its panels and rows 1, 2, ... in grid order, so that
// panel ids (which links to a single panel use) are stable.
func build(b *dashboard.DashboardBuilder) (dashboard.Dashboard, error) {
	d, err := b.Build()
	if err != nil {
		return d, err
	}
	id := uint32(0)
	for _, p := range d.Panels {
		id++
		switch {
		case p.Panel != nil:
			n := id
			p.Panel.Id = &n
		case p.RowPanel != nil:
			p.RowPanel.Id = id
			for i := range p.RowPanel.Panels {
				id++
				n := id
				p.RowPanel.Panels[i].Id = &n
			}
		}
	}
	return d, nil
}

// withRow adds a row titled title to b, followed by panels laid out left to right.
func withRow(b *dashboard.DashboardBuilder, title string, panels ...cog.Builder[dashboard.Panel]) {
	b.WithRow(dashboard.NewRowBuilder(title))
	for _, p := range panels {
		b.WithPanel(p)
	}
}
