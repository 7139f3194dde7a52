package dashboards

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/heatmap"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// This file holds the panel constructors the dashboards share. Each one takes the
// title, the description and the unit, so no panel can lack them, and points the panel
// and its queries at the datasource variable.

// Grafana unit ids the panels use (custom units are "suffix:<text>").
const (
	unitSeconds    = "s"
	unitRatio      = "percentunit"
	unitReqPerSec  = "reqps"
	unitCount      = "short"
	unitTokens     = "suffix: tokens"
	unitTokensRate = "suffix: tokens/s"
	unitMultiple   = "suffix:×"
	unitBytes      = "bytes"
	unitWatts      = "watt"
	unitCelsius    = "celsius"
	unitHertz      = "hertz"
	unitBool       = "bool_yes_no"
	unitText       = "string"
)

// Panel sizes on the 24-column grid.
const (
	fullWidth    = 24
	halfWidth    = 12
	thirdWidth   = 8
	quarterWidth = 6
	graphHeight  = 8
	statHeight   = 4
)

// refIDs name a panel's queries in order.
var refIDs = []string{"A", "B", "C", "D", "E", "F", "G", "H"}

// query is a range query of expr, its series named by legend.
func query(expr, legend string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().
		Datasource(datasourceRef()).
		Expr(expr).
		LegendFormat(legend).
		Range()
}

// tableQuery is an instant query of expr in table format: one row per series, one
// column per label.
func tableQuery(expr string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().
		Datasource(datasourceRef()).
		Expr(expr).
		Format(prometheus.PromQueryFormatTable).
		Instant()
}

// targets names queries A, B, ... and returns them as panel targets.
func targets(queries []*prometheus.DataqueryBuilder) []cog.Builder[variants.Dataquery] {
	out := make([]cog.Builder[variants.Dataquery], len(queries))
	for i, q := range queries {
		out[i] = q.RefId(refIDs[i])
	}
	return out
}

// graph is a time-series panel of queries, half the grid wide.
func graph(title, description, unit string, queries ...*prometheus.DataqueryBuilder) *timeseries.PanelBuilder {
	return timeseries.NewPanelBuilder().
		Title(title).
		Description(description).
		Unit(unit).
		Datasource(datasourceRef()).
		Targets(targets(queries)).
		Height(graphHeight).
		Span(halfWidth).
		LineWidth(1).
		FillOpacity(10).
		ShowPoints(common.VisibilityModeNever).
		Legend(common.NewVizLegendOptionsBuilder().
			DisplayMode(common.LegendDisplayModeTable).
			Placement(common.LegendPlacementBottom).
			ShowLegend(true).
			Calcs([]string{"mean", "max", "lastNotNull"})).
		Tooltip(common.NewVizTooltipOptionsBuilder().
			Mode(common.TooltipDisplayModeMulti).
			Sort(common.SortOrderDescending))
}

// stackedGraph is a graph of rates from 0 up, its series stacked and filled: the parts of
// a whole, such as requests by outcome.
func stackedGraph(title, description, unit string, queries ...*prometheus.DataqueryBuilder) *timeseries.PanelBuilder {
	return graph(title, description, unit, queries...).
		Stacking(common.NewStackingConfigBuilder().Mode(common.StackingModeNormal)).
		FillOpacity(40).Min(0)
}

// ratioGraph is a graph of ratios between 0 and 1.
func ratioGraph(title, description string, queries ...*prometheus.DataqueryBuilder) *timeseries.PanelBuilder {
	return graph(title, description, unitRatio, queries...).Min(0).Max(1)
}

// singleStat is a stat panel showing the last value of each series, a quarter of the
// grid wide.
func singleStat(title, description, unit string, queries ...*prometheus.DataqueryBuilder) *stat.PanelBuilder {
	return stat.NewPanelBuilder().
		Title(title).
		Description(description).
		Unit(unit).
		Datasource(datasourceRef()).
		Targets(targets(queries)).
		Height(statHeight).
		Span(quarterWidth).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"})).
		GraphMode(common.BigValueGraphModeArea).
		ColorMode(common.BigValueColorModeValue).
		Orientation(common.VizOrientationAuto)
}

// tablePanel is a table of instant queries, the full grid wide.
func tablePanel(title, description, unit string, queries ...*prometheus.DataqueryBuilder) *table.PanelBuilder {
	return table.NewPanelBuilder().
		Title(title).
		Description(description).
		Unit(unit).
		Datasource(datasourceRef()).
		Targets(targets(queries)).
		Height(graphHeight).
		Span(fullWidth)
}

// heatmapPanel is a heatmap of the classic buckets of a histogram, as the query's
// heatmap format gives them.
func heatmapPanel(title, description, unit, expr string) *heatmap.PanelBuilder {
	q := prometheus.NewDataqueryBuilder().
		Datasource(datasourceRef()).
		Expr(expr).
		LegendFormat("{{le}}").
		Format(prometheus.PromQueryFormatHeatmap).
		Range()
	return heatmap.NewPanelBuilder().
		Title(title).
		Description(description).
		Unit(unit).
		Datasource(datasourceRef()).
		Targets(targets([]*prometheus.DataqueryBuilder{q})).
		Height(graphHeight).
		Span(halfWidth).
		Calculate(false).
		YAxis(heatmap.NewYAxisConfigBuilder().Unit(unit))
}

// withRepeatedRow adds a row titled title to b, repeated for each value of variable and
// collapsed (Grafana keeps a row's own panels only while it is collapsed), holding
// panels laid out left to right.
func withRepeatedRow(b *dashboard.DashboardBuilder, title, variable string, panels ...cog.Builder[dashboard.Panel]) {
	row := dashboard.NewRowBuilder(title).Repeat(variable).Collapsed(true)
	for _, p := range panels {
		row.WithPanel(p)
	}
	b.WithRow(row)
}

// thresholds are absolute thresholds: base below the first step, then each step's
// colour from its value up.
func thresholds(base string, steps ...dashboard.Threshold) *dashboard.ThresholdsConfigBuilder {
	all := append([]dashboard.Threshold{{Color: base}}, steps...)
	return dashboard.NewThresholdsConfigBuilder().Mode(dashboard.ThresholdsModeAbsolute).Steps(all)
}

// step is a threshold step: colour from value up.
func step(value float64, color string) dashboard.Threshold {
	return dashboard.Threshold{Value: cog.ToPtr(value), Color: color}
}

// valueColors maps each text value to itself, coloured.
func valueColors(colors map[string]string) []dashboard.ValueMapping {
	opts := make(map[string]dashboard.ValueMappingResult, len(colors))
	for v, c := range colors {
		opts[v] = dashboard.ValueMappingResult{Text: cog.ToPtr(v), Color: cog.ToPtr(c)}
	}
	return []dashboard.ValueMapping{{ValueMap: &dashboard.ValueMap{Type: dashboard.MappingTypeValueToText, Options: opts}}}
}

// transformation is a Grafana transformation of a panel's data.
func transformation(id string, options map[string]any) dashboard.DataTransformerConfig {
	return dashboard.DataTransformerConfig{Id: id, Options: options}
}
