// Command gen writes deploy/prometheusrule.yaml from alerts/slogate.rules.yml. It runs
// from `go generate ./alerts/`:
//
//	go run ./gen -rules slogate.rules.yml -out ../deploy/prometheusrule.yaml
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/slogate/slogate/alerts"
)

func main() {
	rules := flag.String("rules", "slogate.rules.yml", "the Prometheus rule file to wrap")
	out := flag.String("out", "../deploy/prometheusrule.yaml", "where to write the PrometheusRule")
	flag.Parse()
	if err := run(*rules, *out); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(rulesPath, outPath string) error {
	rules, err := os.ReadFile(rulesPath)
	if err != nil {
		return err
	}
	return os.WriteFile(outPath, alerts.PrometheusRule(rules), 0o644)
}
