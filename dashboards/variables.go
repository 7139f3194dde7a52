package dashboards

import (
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// This file holds the template variables the dashboards share. Every query filters by
// the namespace and pod variables (the target labels a Kubernetes ServiceMonitor or
// PodMonitor adds), and by model where the metric carries that label.

// Variable names, as queries reference them.
const (
	varDatasource = "datasource"
	varNamespace  = "namespace"
	varPod        = "pod"
	varModel      = "model"
	varWorkload   = "workload"
	varTenant     = "tenant"
	varObjective  = "objective"
)

// datasourceRef is the data source of every panel and query: the datasource variable.
func datasourceRef() common.DataSourceRef {
	return common.DataSourceRef{
		Type: cog.ToPtr("prometheus"),
		Uid:  cog.ToPtr("${" + varDatasource + "}"),
	}
}

// datasourceVariable lets the viewer pick any Prometheus-compatible data source.
func datasourceVariable() *dashboard.DatasourceVariableBuilder {
	return dashboard.NewDatasourceVariableBuilder(varDatasource).
		Label("Data source").
		Description("The Prometheus data source that scrapes slogate.").
		Type("prometheus").
		Multi(false)
}

// labelVariable is a multi-value query variable over label_values(query, label), "All"
// by default. The all value is ".*" so that series without the label (slogate scraped
// outside Kubernetes) still match.
func labelVariable(name, label, description, query string) *dashboard.QueryVariableBuilder {
	q := "label_values(" + query + ", " + name + ")"
	return dashboard.NewQueryVariableBuilder(name).
		Label(label).
		Description(description).
		Query(dashboard.StringOrMap{String: cog.ToPtr(q)}).
		Definition(q).
		Datasource(datasourceRef()).
		Current(allOption()).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
		Sort(dashboard.VariableSortAlphabeticalAsc).
		Multi(true).
		IncludeAll(true).
		AllValue(".*")
}

// allOption is the "All" selection of a multi-value variable.
func allOption() dashboard.VariableOption {
	return dashboard.VariableOption{
		Selected: cog.ToPtr(true),
		Text:     dashboard.StringOrArrayOfString{ArrayOfString: []string{"All"}},
		Value:    dashboard.StringOrArrayOfString{ArrayOfString: []string{"$__all"}},
	}
}

// namespaceVariable lists the namespaces slogate runs in.
func namespaceVariable() *dashboard.QueryVariableBuilder {
	return labelVariable(varNamespace, "Namespace",
		"Kubernetes namespaces with a slogate sidecar (the namespace target label).",
		"slogate_build_info")
}

// podVariable lists the pods of the selected namespaces.
func podVariable() *dashboard.QueryVariableBuilder {
	return labelVariable(varPod, "Pod",
		"Pods with a slogate sidecar in the selected namespaces (the pod target label).",
		`slogate_build_info{namespace=~"$namespace"}`)
}

// modelVariable lists the served models, as slogate labels its request metrics.
func modelVariable() *dashboard.QueryVariableBuilder {
	return labelVariable(varModel, "Model",
		"Models the engine serves, as slogate's model label has them (other: any name the engine does not serve).",
		`slogate_requests_total{namespace=~"$namespace", pod=~"$pod"}`)
}

// tenantVariable lists the tenants, as the tenant metrics label them; empty without a
// tenants section in the tiers file.
func tenantVariable() *dashboard.QueryVariableBuilder {
	return labelVariable(varTenant, "Tenant",
		"Tenants of the tiers file's tenants section, as slogate's tenant label has them (other: every client of no named tenant). The tenant rows repeat for each one selected.",
		`slogate_tenant_requests_total{namespace=~"$namespace", pod=~"$pod"}`)
}

// workloadVariable lists the prober's workloads.
func workloadVariable() *dashboard.QueryVariableBuilder {
	return labelVariable(varWorkload, "Workload",
		"Workloads of the synthetic prober.",
		`slogate_probe_runs_total{namespace=~"$namespace", pod=~"$pod"}`)
}

// objectiveVariable is the SLO objective, the share of requests that must be good, from
// which the error budget (1 - objective) and its burn rate follow.
func objectiveVariable() *dashboard.CustomVariableBuilder {
	const values = "0.9,0.95,0.99,0.995,0.999"
	return dashboard.NewCustomVariableBuilder(varObjective).
		Label("SLO objective").
		Description("Share of requests that must meet their tier's SLO; the error budget is 1 minus it.").
		Values(dashboard.StringOrMap{String: cog.ToPtr(values)}).
		Current(dashboard.VariableOption{
			Selected: cog.ToPtr(true),
			Text:     dashboard.StringOrArrayOfString{String: cog.ToPtr("0.99")},
			Value:    dashboard.StringOrArrayOfString{String: cog.ToPtr("0.99")},
		}).
		Options(objectiveOptions(values)).
		Multi(false).
		IncludeAll(false)
}

// objectiveOptions lists the options of the objective variable, 0.99 selected.
func objectiveOptions(values string) []dashboard.VariableOption {
	var out []dashboard.VariableOption
	for _, v := range strings.Split(values, ",") {
		out = append(out, dashboard.VariableOption{
			Selected: cog.ToPtr(v == "0.99"),
			Text:     dashboard.StringOrArrayOfString{String: cog.ToPtr(v)},
			Value:    dashboard.StringOrArrayOfString{String: cog.ToPtr(v)},
		})
	}
	return out
}
