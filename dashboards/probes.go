package dashboards

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// Probes is the synthetic-probes dashboard (uid slogate-probes): the latest probe's
// matrix of cells and their states, probe TTFT and throughput over time, the functional
// gate, and the calibration's knees, limits and age.
func Probes() (dashboard.Dashboard, error) {
	b := newDashboard("slogate-probes", "slogate / Synthetic probes",
		"What slogate's synthetic prober measured in its latest runs (context length × concurrency, workload shapes, arrival-rate scans), and the calibration that derives the admission limits from it.").
		WithVariable(workloadVariable())
	withRow(b, "Latest probe", latestProbePanels()...)
	withRow(b, "Probe results over time", probeHistoryPanels()...)
	withRow(b, "Calibration", calibrationPanels()...)
	return build(b)
}

// selProbe is sel for a prober metric: it also filters by workload.
func selProbe(metric string, matchers ...string) string {
	return sel(metric, append([]string{`workload=~"$workload"`}, matchers...)...)
}

// cellStateColors colours the cell states of slogate_probe_cell_state.
var cellStateColors = map[string]string{
	"valid":         "green",
	"looped":        "purple",
	"over_capacity": "orange",
	"rej":           "yellow",
	"n/c":           "blue",
	"failed":        "red",
	"skipped":       "text",
}

// verdictColors colours the verdicts of slogate_probe_gate_check.
var verdictColors = map[string]string{"pass": "green", "fail": "red", "skipped": "text"}

// regressionMapping names and colours the values of slogate_probe_regression.
func regressionMapping() []dashboard.ValueMapping {
	return []dashboard.ValueMapping{{ValueMap: &dashboard.ValueMap{Type: dashboard.MappingTypeValueToText, Options: map[string]dashboard.ValueMappingResult{
		"1": {Text: cog.ToPtr("regressed"), Color: cog.ToPtr("red")},
		"0": {Text: cog.ToPtr("no regression"), Color: cog.ToPtr("green")},
	}}}}
}

// colorCells shows each cell's text on its value mapping's colour.
func colorCells() common.TableCellOptions {
	return common.TableCellOptions{TableColoredBackgroundCellOptions: common.NewTableColoredBackgroundCellOptions()}
}

// matrix turns a table of one row per series into a matrix: one row per value of the
// row label, one column per value of the column label, the value field in the cells.
func matrix(row, column, value string) dashboard.DataTransformerConfig {
	return transformation("groupingToMatrix", map[string]any{
		"rowField": row, "columnField": column, "valueField": value, "emptyValue": "empty",
	})
}

// latestProbePanels show the latest probe report.
func latestProbePanels() []cog.Builder[dashboard.Panel] {
	return []cog.Builder[dashboard.Panel]{
		singleStat("Probe running", "Whether a scheduled probe is running now on any selected pod.", unitBool,
			query("max ("+selProbe("slogate_probe_running")+")", "running")).
			ColorMode(common.BigValueColorModeNone),
		singleStat("Last probe completed", "Whether the last probe of every selected workload completed (0: it failed or was stopped).", unitBool,
			query("min ("+selProbe("slogate_probe_last_success")+")", "completed")).
			Thresholds(thresholds("red", step(1, "green"))),
		singleStat("Since last probe start", "Time since the most recent probe started, on any selected pod and workload.", unitSeconds,
			query("time() - max ("+selProbe("slogate_probe_last_start_timestamp_seconds")+")", "age")).
			ColorMode(common.BigValueColorModeNone),
		singleStat("Failed gate checks", "Functional-gate checks whose verdict in the latest probe is fail.", unitCount,
			query("sum ("+selProbe("slogate_probe_gate_check", `verdict="fail"`)+") or vector(0)", "failed")).
			Thresholds(thresholds("green", step(1, "red"))),
		singleStat("Probe regressions", "Cells and headline figures of the latest probe that are worse than in the run before beyond the noise band (slogate_probe_regression, with --probe-history-dir); the table below names them.", unitCount,
			query("count ("+selProbe("slogate_probe_regression")+" == 1) or vector(0)", "regressed")).
			Thresholds(thresholds("green", step(1, "red"))),
		tablePanel("Latest probe matrix", "The latest probe's cells: one row per pod, workload and row (context such as 8K, or shape such as API-S), one column per load (concurrency such as 4, or a multiple of a scan's reference rate such as 1.1x), each cell its state: valid, looped, over_capacity, rej, n/c, failed or skipped. Only valid cells have figures.", unitText,
			tableQuery(`label_join(`+selProbe("slogate_probe_cell_state")+` == 1, "cell", " · ", "pod", "workload", "row")`)).
			WithTransformation(matrix("cell", "load", "state")).
			Mappings(valueColors(cellStateColors)).
			CellOptions(colorCells()).
			Height(10),
		tablePanel("Functional gate", "Each functional-gate check of the latest probe and its verdict: pass, fail or skipped.", unitText,
			tableQuery(selProbe("slogate_probe_gate_check")+" == 1")).
			WithTransformation(transformation("filterFieldsByName", map[string]any{
				"include": map[string]any{"names": []string{"pod", "workload", "check", "verdict"}},
			})).
			Mappings(valueColors(verdictColors)).
			CellOptions(colorCells()).
			Span(halfWidth),
		tablePanel("Compared cells", "Each cell and headline figure (output_tok_per_s, ttft_p95_s, tpot_p95_s) of the latest probe, compared with the run before (slogate_probe_regression): regressed when worse beyond the noise band or no longer valid, regressions first. Compare the two stored reports (GET /probe/history on the admin port) with slogate compare.", unitText,
			tableQuery("sort_desc("+selProbe("slogate_probe_regression")+")")).
			WithTransformation(transformation("filterFieldsByName", map[string]any{
				"include": map[string]any{"names": []string{"pod", "workload", "row", "load", "figure", "Value"}},
			})).
			Mappings(regressionMapping()).
			CellOptions(colorCells()).
			Span(halfWidth),
		graph("Probe runs and holds", "Probes that ran to the end, and probes not started or stopped because live traffic needed the engine, per workload, in each rate interval.", unitCount,
			query(sumBy("workload", increase(selProbe("slogate_probe_runs_total"))), "ran {{workload}}"),
			query(sumBy("workload", increase(selProbe("slogate_probe_held_total"))), "held {{workload}}")).
			DrawStyle(common.GraphDrawStyleBars).Min(0),
	}
}

// cellLegend names a probe cell's series.
const cellLegend = "{{workload}} {{row}} @{{load}} {{pod}}"

// probeHistoryPanels show the valid cells' figures over time: each scrape reads the
// latest report, so a line steps when a probe finishes.
func probeHistoryPanels() []cog.Builder[dashboard.Panel] {
	return []cog.Builder[dashboard.Panel]{
		graph("Probe TTFT p95", "95th percentile time to first token of each valid cell of the latest probe (figures of cells that are not valid are left out).", unitSeconds,
			query(selProbe("slogate_probe_ttft_p95_seconds"), "p95 "+cellLegend)).Min(0),
		graph("Probe TTFT p50", "Median time to first token of each valid cell of the latest probe.", unitSeconds,
			query(selProbe("slogate_probe_ttft_p50_seconds"), "p50 "+cellLegend)).Min(0),
		graph("Probe throughput", "Output tokens per second of each valid cell of the latest probe (median over its valid rounds).", unitTokensRate,
			query(selProbe("slogate_probe_output_tokens_per_second"), cellLegend)).Min(0),
		graph("Probe TPOT p95", "95th percentile of per-request time per output token of each valid cell of the latest probe.", unitSeconds,
			query(selProbe("slogate_probe_tpot_p95_seconds"), cellLegend)).Min(0),
		ratioGraph("Probe success ratio", "Share of each cell's judged requests that met every success rule, in the latest probe.",
			query(selProbe("slogate_probe_success_ratio"), cellLegend)).Span(fullWidth),
	}
}

// calibrationPanels show the latest complete calibration.
func calibrationPanels() []cog.Builder[dashboard.Panel] {
	const week = 7 * 86400
	return []cog.Builder[dashboard.Panel]{
		singleStat("Calibration age", "Time since the latest complete calibration finished (time() - slogate_calibration_timestamp_seconds), the oldest of the selected pods. Limits older than a week are stale.", unitSeconds,
			query("time() - min ("+sel("slogate_calibration_timestamp_seconds")+")", "age")).
			Thresholds(thresholds("green", step(week, "red"))),
		singleStat("Calibrated limits applied", "Whether the latest calibration's limits are in force on every selected pod (0: only published, --calibrate-apply=false).", unitBool,
			query("min ("+sel("slogate_calibration_applied")+")", "applied")).
			ColorMode(common.BigValueColorModeNone),
		singleStat("Last calibration completed", "Whether the last calibration completed on every selected pod (0: it failed or was stopped).", unitBool,
			query("min ("+sel("slogate_calibration_last_success")+")", "completed")).
			Thresholds(thresholds("red", step(1, "green"))),
		singleStat("Calibration running", "Whether a calibration is running now on any selected pod.", unitBool,
			query("max ("+sel("slogate_calibration_running")+")", "running")).
			ColorMode(common.BigValueColorModeNone),
		graph("Knee by tier", "Each tier's knee in the latest calibration: the highest arrival rate the engine sustained inside the tier's SLO, from which its limits derive.", unitReqPerSec,
			query(sel("slogate_calibration_knee_requests_per_second"), "{{tier}} {{pod}}")).Min(0),
		graph("Knee change", "Each tier's knee over its knee in the calibration before (1: unchanged). A move of more than 20% either way deserves a look.", unitMultiple,
			query(sel("slogate_calibration_knee_change_ratio"), "{{tier}} {{pod}}")).
			Thresholds(thresholds("red", step(0.8, "green"), step(1.2, "red"))).
			ThresholdsStyle(common.NewGraphThresholdsStyleConfigBuilder().Mode(common.GraphThresholdsStyleModeLine)),
		tablePanel("Calibrated limits", "The limits the latest calibration derived per tier (and pod): rate (requests/s), burst, max_in_flight, max_queue and max_queue_wait_seconds. The limits in force are on the capacity dashboard.", unitCount,
			tableQuery(`label_join(`+sel("slogate_calibration_limit")+`, "cell", " · ", "pod", "tier")`)).
			WithTransformation(matrix("cell", "limit", "Value")),
		graph("Calibrations run and held", "Calibrations that ran to the end, and calibrations not started or stopped because live traffic needed the engine, in each rate interval.", unitCount,
			query(sumBy("", increase(sel("slogate_calibration_runs_total"))), "ran"),
			query(sumBy("", increase(sel("slogate_calibration_held_total"))), "held")).
			DrawStyle(common.GraphDrawStyleBars).Min(0).Span(fullWidth),
	}
}
