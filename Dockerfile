# syntax=docker/dockerfile:1
# The images of the testbed's binaries, one target each: static builds (CGO
# off) on a minimal, non-root base. `make images` builds the same images
# without Docker, as archives for `ctr images import` (cluster/image, whose
# test keeps this file and its specs equal: binaries, entrypoint, user,
# ports). With Docker, build from the repository root, TAG being the charts'
# appVersion (charts/chf/Chart.yaml), which they pull by default:
#   docker build --target chf --build-arg VERSION=$TAG -t chf-testbed/chf:$TAG .   # chf, and aslite beside it
#   docker build --target loadgen --build-arg VERSION=$TAG -t chf-testbed/loadgen:$TAG .
# aslite is the store of `chf aslite` without client-go; run it in the chf
# image with command ["/usr/local/bin/aslite"].
# Multi-platform: docker buildx build --platform linux/amd64,linux/arm64 ...

ARG GO_VERSION=1.26

# Build stage: runs on the build host's platform and cross-compiles every
# command once; each image below takes the binaries it needs.
FROM --platform=$BUILDPLATFORM golang:${GO_VERSION}-bookworm AS build
ARG TARGETOS=linux
ARG TARGETARCH=amd64
ARG VERSION=dev
WORKDIR /src
# Modules first, so source edits do not invalidate the download layer.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -buildvcs=false -ldflags="-s -w -X main.version=${VERSION}" \
      -o /out/ ./cmd/chf ./cmd/aslite ./cmd/loadgen

# Runtime stages: no shell, no package manager, CA certificates and tzdata
# only; uid/gid 65532 (nonroot), matching the charts' securityContext.
FROM gcr.io/distroless/static-debian12:nonroot AS loadgen
COPY --from=build /out/loadgen /usr/local/bin/loadgen
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/loadgen"]

FROM gcr.io/distroless/static-debian12:nonroot AS chf
COPY --from=build /out/chf /out/aslite /usr/local/bin/
USER 65532:65532
# cgw 8080, ocp 8081, abm 8082 (HTTP: API, /healthz, /readyz, /metrics), Diameter 3868, aslite 3000.
EXPOSE 8080 8081 8082 3868 3000
ENTRYPOINT ["/usr/local/bin/chf"]
