# syntax=docker/dockerfile:1
# The Stepwise controller manager image.
#
#   docker build -t ghcr.io/stepwise-dev/stepwise:v0.1.0 .
#   docker buildx build --platform linux/amd64,linux/arm64 -t ... --push .

# The builder runs on the build machine's own platform and cross-compiles
# (CGO is off), which is much faster than emulating the target platform.
FROM --platform=$BUILDPLATFORM golang:1.26 AS builder
ARG TARGETOS
ARG TARGETARCH
WORKDIR /src

# Modules first, in their own layer: source edits then reuse the download.
COPY go.mod go.sum ./
COPY api/go.mod api/go.sum ./api/
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download

COPY . .
# Static binary (no libc in the final image), no local paths in stack
# traces (-trimpath), no symbol table or DWARF (-s -w) to keep it small.
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags "-s -w" -o /manager ./cmd/manager

# distroless/static: CA certificates (for HTTPS to Prometheus), tzdata and
# /etc/passwd with the nonroot user, and no shell or package manager.
FROM gcr.io/distroless/static:nonroot
COPY --from=builder /manager /manager
# Numeric, so that Kubernetes can verify runAsNonRoot without a passwd lookup.
USER 65532:65532
ENTRYPOINT ["/manager"]
