# syntax=docker/dockerfile:1
#
# slogate's container image: `slogate serve` as a non-root process on a small glibc base.
#
#   docker build --build-arg VERSION=v0.1.0 --build-arg REVISION=$(git rev-parse HEAD) \
#     -t ghcr.io/slogate/slogate:v0.1.0 .
#
# cgo is on because the default build reads GPUs through NVIDIA DCGM
# (gpu/dcgm.go, `//go:build cgo && linux`). libdcgm.so.4 is opened with dlopen at
# run time and is NOT in this image: without it slogate logs one warning and exports
# slogate_gpu_collector_up 0 (docs/metrics.md, "GPUs"). For GPU metrics, build FROM this
# image and add libdcgm.so.4 (DCGM 4) and its libraries on the loader's path. The run
# image must have glibc (cgo links against it), so it is distroless/base, not static.
# deploy/deploy_test.go checks this file; there is deliberately no HEALTHCHECK: Kubernetes
# probes /healthz and /readyz on the admin port (deploy/base/deployment.yaml).

ARG GO_VERSION=1.26

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
# Modules first, so that a change of source alone reuses the downloaded modules.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=devel
ENV CGO_ENABLED=1 GOFLAGS=-trimpath
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    go build -ldflags "-s -w -X github.com/slogate/slogate/sidecar.version=${VERSION}" -o /out/slogate ./cmd/slogate \
    && /out/slogate version

FROM gcr.io/distroless/base-debian12:nonroot
ARG VERSION=devel
ARG REVISION=unknown
# The project's licence is not declared yet; set it (an SPDX expression) when it is.
ARG LICENSES=NOASSERTION
LABEL org.opencontainers.image.title="slogate" \
      org.opencontainers.image.description="SLO-aware sidecar for vLLM and SGLang: measures every request, exports Prometheus metrics, controls admission by input-length tier, probes the engine" \
      org.opencontainers.image.source="https://github.com/slogate/slogate" \
      org.opencontainers.image.url="https://github.com/slogate/slogate" \
      org.opencontainers.image.documentation="https://github.com/slogate/slogate/blob/main/docs/operations.md" \
      org.opencontainers.image.licenses="${LICENSES}" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
COPY --from=build /out/slogate /slogate
# Numeric, so that Kubernetes' runAsNonRoot can verify it (distroless' nonroot user).
USER 65532:65532
# Data listener (clients), admin listener (/metrics, /healthz, /readyz).
EXPOSE 8080 9090
ENTRYPOINT ["/slogate", "serve"]
