// Package alerts holds slogate's Prometheus recording and alerting rules
// (slogate.rules.yml), their promtool unit tests (tests/*.yml) and the Go tests that run
// them. It also renders the rules as a Prometheus Operator PrometheusRule object, which
// `go generate ./alerts/` writes to deploy/prometheusrule.yaml; a test fails when that file
// is out of date.
//
// The tests need promtool (Debian package prometheus) and amtool (Debian package
// prometheus-alertmanager) on PATH; `make test` installs them.
package alerts

//go:generate go run ./gen -rules slogate.rules.yml -out ../deploy/prometheusrule.yaml
