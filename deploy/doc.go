// Package deploy holds slogate's Kubernetes manifests (a kustomize base with the sidecar in
// front of a simulated engine, overlays for vLLM and SGLang, the ServiceMonitor, an example
// probe CronJob), the Prometheus rules' kustomization and the autoscaling examples (KEDA,
// and an HPA with prometheus-adapter); see README.md. It has no Go API:
// its tests check the manifests and the repository's Dockerfile against the code, so that
// ports, probe paths, environment variables, the shutdown timing and the tiers file cannot
// drift from what slogate reads.
package deploy
