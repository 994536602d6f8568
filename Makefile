# Stepwise: GitOps progressive delivery with in-place updates.
# Every tool version is pinned here or in a go.mod under hack/.

KWOK_VERSION            ?= v0.8.0
CONTROLLER_GEN_VERSION  ?= v0.23.0
GOLANGCI_LINT_VERSION   ?= v2.15.0
# The real node (test/realnode): containerd, crictl and the CNI plugins here,
# the kubelet (Kubernetes v1.37.2) in hack/kubelet/go.mod.
CONTAINERD_VERSION      ?= v2.4.2
CRI_TOOLS_VERSION       ?= v1.37.0
CNI_PLUGINS_VERSION     ?= v1.10.0
# Kubernetes v1.37.2 and etcd v3.6.16 are pinned in hack/kube/go.mod and hack/etcd/go.mod;
# Traefik v3.6.12 (the real node's Gateway API data plane) in hack/traefik/go.mod.
# Flux v1.9.6 and Argo CD v3.2.6 (test/gitops) in hack/gitops/versions.

SHELL          := /bin/bash
.SHELLFLAGS    := -o pipefail -ec

# TEST_SUMMARY keeps, of `go test -v` output, the results and what the tests
# said (file_test.go:N: lines), with the indented lines that carry on a
# message (up to 40), so that a failure's Expected/to equal reaches the
# console; the whole log is in the file that the target names.
TEST_SUMMARY = awk '/^([ \t]*--- |PASS|FAIL|ok|panic)|_test\.go/ {print; more = 40; next} \
	more > 0 && /^[ \t]/ && !/^[ \t]*(=== |--- )/ {print; more--; next} {more = 0}'

BIN            := $(CURDIR)/bin
CONTROLLER_GEN := $(BIN)/controller-gen
GOLANGCI_LINT  := $(BIN)/golangci-lint
export KUBEBUILDER_ASSETS := $(BIN)
export STEPWISE_BIN       := $(BIN)

# Bench size: make bench PODS=200
PODS ?= 1000

.PHONY: all
all: build

##@ Build

.PHONY: build
build: generate ## Build the manager and the kubectl plugin into bin/.
	go build -o $(BIN)/manager ./cmd/manager
	go build -o $(BIN)/kubectl-stepwise ./cmd/kubectl-stepwise

# The release tooling (hack/release: the image, the release) is a module of
# its own, so that go.mod lists only what the shipped binaries link: it is
# built into bin/ and run from the repository root, which it builds from.
RELEASE_TOOL = go -C hack/release build -o $(BIN)/$(1) ./cmd/$(2) && $(BIN)/$(1)

# The manager image (hack/release/image, no Docker): make image, then load
# dist/stepwise.tar into your nodes or make image-push IMAGE=REGISTRY/REPO:TAG.
IMAGE     ?= ghcr.io/stepwise-dev/stepwise:dev
PLATFORMS ?= linux/amd64,linux/arm64
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null)
IMAGE_ARGS = --version "$(VERSION)" --revision "$(shell git rev-parse HEAD 2>/dev/null)" --ca-certs "$(CA_CERTS)"
# The CA bundle (PEM) the image ships: the certificates the manager trusts
# for HTTPS to Prometheus and webhooks. Debian's ca-certificates package
# installs the default; elsewhere, e.g. CA_CERTS=/etc/pki/tls/certs/ca-bundle.crt
# (Fedora) or /etc/ssl/cert.pem (macOS, Alpine).
CA_CERTS  ?= /etc/ssl/certs/ca-certificates.crt
check-ca-certs = @test -f "$(CA_CERTS)" || { echo "CA_CERTS=$(CA_CERTS): no such file. The image ships this CA bundle; install it (apt-get install ca-certificates) or name another PEM bundle: make $@ CA_CERTS=/path/to/ca-bundle.crt" >&2; exit 1; }

.PHONY: image
image: ## Build the manager image for this machine's platform: dist/image (OCI layout) and dist/stepwise.tar (tagged IMAGE). CA_CERTS: the CA bundle it ships.
	$(check-ca-certs)
	$(call RELEASE_TOOL,stepwise-image,image) $(IMAGE_ARGS) --oci-layout dist/image --tarball dist/stepwise.tar --tag $(IMAGE)

.PHONY: image-push
image-push: ## Build the manager image for PLATFORMS and push it to IMAGE (credentials of ~/.docker/config.json).
	$(check-ca-certs)
	$(call RELEASE_TOOL,stepwise-image,image) $(IMAGE_ARGS) --platforms $(PLATFORMS) --push $(IMAGE)

# A release (hack/release): make release [VERSION=v0.2.0]. The version
# must be what the tree installs (charts/stepwise's appVersion, config/manager's
# tag), which is also the default; every time written is the commit's
# (SOURCE_DATE_EPOCH), so the same commit gives the same bytes.
DIST       ?= dist
IMAGE_REPO ?= ghcr.io/stepwise-dev/stepwise
RELEASE_ARGS = --out "$(DIST)" --repository "$(IMAGE_REPO)" --ca-certs "$(CA_CERTS)" \
               $(if $(filter command line,$(origin VERSION)),--version "$(VERSION)")

.PHONY: release
release: ## Build a release into DIST (replaced): the image index for linux/amd64+arm64 (OCI layout and tarball), install.yaml and the chart pinned to its digest, the plugin archives, krew manifest, SBOMs, checksums.txt.
	$(check-ca-certs)
	rm -rf "$(DIST)"
	$(call RELEASE_TOOL,stepwise-release,release) $(RELEASE_ARGS)

.PHONY: release-push
release-push: ## Push the image index of DIST (make release) to the REPO:VERSION it names, its digest unchanged (credentials of ~/.docker/config.json).
	$(call RELEASE_TOOL,stepwise-release,release) --out "$(DIST)" --push

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code (with the licence header of hack/boilerplate.go.txt).
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs and RBAC into config/ and charts/stepwise.
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=stepwise-manager paths=./controllers/... output:rbac:artifacts:config=config/rbac
	@# The Helm chart installs the same CRDs and ClusterRole (test/config/chart_test.go).
	rm -f charts/stepwise/crds/*.yaml && cp config/crd/bases/*.yaml charts/stepwise/crds/
	cp config/rbac/role.yaml charts/stepwise/files/role.yaml

.PHONY: verify-generated
verify-generated: generate manifests ## Fail when generated files are out of date.
	@git diff --exit-code -- api config charts || { echo "generated files are stale: run 'make generate manifests' and commit"; exit 1; }

##@ Test

.PHONY: test-assets
test-assets: ## Build the pinned control plane, etcd, kwok and controller-gen into bin/ (skips what exists).
	KWOK_VERSION=$(KWOK_VERSION) CONTROLLER_GEN_VERSION=$(CONTROLLER_GEN_VERSION) hack/test-assets.sh

NODE_ASSETS_ENV := CONTAINERD_VERSION=$(CONTAINERD_VERSION) CRI_TOOLS_VERSION=$(CRI_TOOLS_VERSION) CNI_PLUGINS_VERSION=$(CNI_PLUGINS_VERSION)

.PHONY: node-assets
node-assets: ## Build the real node's pinned kubelet, containerd, ctr, crictl, CNI plugins and Traefik into bin/ (skips what exists).
	$(NODE_ASSETS_ENV) hack/node-assets.sh

.PHONY: traefik
traefik: ## Build Traefik v3.6.12 (pinned in hack/traefik/go.mod) into bin/ alone (skips it when present; part of node-assets).
	$(NODE_ASSETS_ENV) hack/node-assets.sh traefik

$(CONTROLLER_GEN):
	GOBIN=$(BIN) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)

# The tests, benchmarks and beds live in their own module, test/ (as
# Cluster API's do), so that go.mod lists only what the shipped binaries and
# the release tooling link. TEST_GO runs the go command in it; its package
# paths below are relative to test/.
TEST_GO := go -C test

# Packages whose tests need an API server (envtest) or a kwok cluster: of
# the main module, then of the test module.
INTEGRATION_PKGS      := ./cmd/kubectl-stepwise/internal/apitest/... ./internal/testsupport/promrunner
TEST_INTEGRATION_PKGS := ./integration/... ./config ./examples ./judgeprom ./traffic
NODE_PKGS        := ./realnode
E2E_PKGS         := ./e2e/... ./demo
UNIT_PKGS         = $(shell go list ./... | grep -vE '/internal/apitest|/internal/testsupport/promrunner$$')
TEST_UNIT_PKGS    = $(shell $(TEST_GO) list ./... | grep -vE '/test/(integration|e2e|bench|demo|traffic|judgeprom|goinstall|release|docs|gitops|config|examples)|/test/realnode$$')

.PHONY: test
# gitops-assets comes first: the examples' dry run (test-integration) checks
# the Flux and Argo CD kinds against the CRDs it puts in bin/gitops-crds.
test: test-assets gitops-assets vet verify-generated test-unit test-install test-release test-integration test-docs test-e2e test-gitops test-node bench-smoke ## Everything CI runs.

.PHONY: vet
vet:
	go vet ./...
	$(TEST_GO) vet ./...
	go -C hack/release vet ./...

.PHONY: test-unit
test-unit: ## Pure functions only: no API server, seconds (Prometheus-backed analysis tests included).
	go test -count=1 $(UNIT_PKGS)
	$(TEST_GO) test -count=1 $(TEST_UNIT_PKGS)
	go -C hack/release test -count=1 ./...

.PHONY: test-install
test-install: ## go install of the plugin from a module proxy built from this checkout (network for uncached dependencies; about 3 minutes cold, 30 s warm).
	$(TEST_GO) test -count=1 -v ./goinstall -timeout 15m

.PHONY: test-release
test-release: release ## make release, then test/release checks DIST (digests, checksums, krew, SBOMs, archive times) and builds it again to compare every file's SHA-256.
	STEPWISE_DIST="$(abspath $(DIST))" $(TEST_GO) test -count=1 ./release -timeout 40m -v 2>&1 | $(TEST_SUMMARY)

.PHONY: test-integration
test-integration: test-assets ## Controllers against a real kube-apiserver + etcd (envtest).
	@# client-go's cache mutation detector: the manager fails (panics) when
	@# anything changes an object in its informer cache. The CloneSet
	@# controller reads its Pods without copies (ownedPods), so a write into
	@# one of them would otherwise go unseen.
	KUBE_CACHE_MUTATION_DETECTOR=true go test -count=1 -p 1 $(INTEGRATION_PKGS) -timeout 20m
	KUBE_CACHE_MUTATION_DETECTOR=true $(TEST_GO) test -count=1 -p 1 $(TEST_INTEGRATION_PKGS) -timeout 20m

.PHONY: test-docs
test-docs: test-assets build ## Every shell block of README.md, docs/ and examples/*/README.md run in order against a kwok cluster per file (or marked not runnable, with the reason); prints where the full log is.
	$(call logged,docs,$(TEST_GO) test -count=1 ./docs -timeout 30m -v)

# Where the test targets write their full logs: a new temporary directory per run
# unless LOG_DIR names one (.ci/run does, for all of its run's logs).
LOG_DIR ?=

# $(call logged,NAME,COMMAND) runs COMMAND with its whole output in the log
# directory's NAME.log and TEST_SUMMARY's cut on the console, and prints the
# log's path first and last. COMMAND may use $$dir, the log directory.
logged = @dir="$(LOG_DIR)"; [ -n "$$dir" ] || dir="$$(mktemp -d -t stepwise-$(1).XXXXXX)"; log="$$dir/$(1).log"; \
	echo "full $(1) log: $$log"; trap 'echo "full $(1) log: $$log"' EXIT; \
	$(2) 2>&1 | tee "$$log" | $(TEST_SUMMARY)

.PHONY: test-e2e
test-e2e: test-assets ## Whole stories on a kwokctl cluster (real scheduler, GC, EndpointSlices); prints where the full log is.
	$(call logged,e2e,$(TEST_GO) test -count=1 -p 1 -parallel 10 $(E2E_PKGS) -timeout 40m -v)

.PHONY: gitops-assets
gitops-assets: ## Build real Flux (source-, kustomize-controller) and Argo CD from the module proxy into bin/, with their CRDs (skips what exists; about 15 minutes cold).
	hack/gitops-assets.sh

.PHONY: test-gitops
test-gitops: test-assets gitops-assets ## Real Flux and real Argo CD apply Stepwise's examples from a git server on 127.0.0.1 to a kwok cluster (git and redis-server from Debian); prints where the full log is.
	$(call logged,gitops,STEPWISE_GITOPS_LOG_DIR="$$dir/gitops-tools" $(TEST_GO) test -count=1 -p 1 ./gitops -timeout 30m -v)

.PHONY: test-node
test-node: test-assets node-assets kruise-manager release ## Stepwise installed from the release in DIST (its image tarball, install.yaml, the chart) on a real kubelet + containerd (root; runc from Debian; see docs/real-node.md).
	@# test/realnode reads DIST (make release above) through STEPWISE_DIST.
	$(call logged,node,STEPWISE_DIST="$(abspath $(DIST))" $(TEST_GO) test -count=1 -p 1 $(NODE_PKGS) -timeout 30m -v)

.PHONY: bench-node
bench-node: test-assets node-assets kruise-manager release ## The same image change of $(NODE_PODS) two-container Pods by Stepwise, a Deployment, a StatefulSet and OpenKruise on the real node (root); docs/bench-node.md and .svg.
	STEPWISE_DIST="$(abspath $(DIST))" $(TEST_GO) test -count=1 -p 1 ./realnode -run 'TestRealNode/^(InstallFromRelease|SideBySide)$$' -timeout 60m -v \
		-args -sidebyside-pods=$(NODE_PODS) -sidebyside-report=$(CURDIR)/docs/bench-node.md -sidebyside-svg=$(CURDIR)/docs/bench-node.svg

.PHONY: demo
demo: test-assets ## The story on 127.0.0.1 (kwok, Prometheus, traffic): v2 promoted step by step, v3-bad aborted and rolled back in place.
	$(TEST_GO) run ./demo

.PHONY: bench
bench: test-assets ## In-place update of $(PODS) Pods on one kwok cluster; prints wall time, writes/Pod, RSS.
	$(TEST_GO) test -count=1 ./bench/ -run TestNone -bench BenchmarkInPlaceUpdate -benchtime 1x -timeout 30m -args -pods=$(PODS)

# bench-scale's sizes: SCALE_CLONESETS CloneSets of SCALE_PODS Pods updated
# at once, while SCALE_ROLLOUTS Rollouts, each over a CloneSet of
# SCALE_ROLLOUT_PODS Pods, step with SCALE_ANALYSIS measurements (one every
# 10 s) against one Prometheus. Set them on the command line or in the
# environment: make bench-scale SCALE_PODS=100 SCALE_ROLLOUTS=20
SCALE_CLONESETS    ?= 10
SCALE_PODS         ?= 1000
SCALE_ROLLOUTS     ?= 200
SCALE_ROLLOUT_PODS ?= 4
SCALE_ANALYSIS     ?= 6
# Flags for the manager besides its defaults, e.g. --cloneset-concurrency=16.
SCALE_MANAGER_ARGS ?=
# Environment for the manager alone, e.g. GOGC=100 (set for the whole run it
# would reach the API server and kwok as well).
SCALE_MANAGER_ENV  ?=

.PHONY: bench-scale
bench-scale: test-assets ## 10 CloneSets x 1000 Pods updated at once while 200 Rollouts step with analysis; wall time, writes/Pod, RSS, step reaction, queries/s, reconciles/s, queue depth.
	$(TEST_GO) test -count=1 ./bench/ -run TestNone -bench BenchmarkScale -benchtime 1x -timeout 120m \
		-args -scale-clonesets=$(SCALE_CLONESETS) -scale-pods=$(SCALE_PODS) -scale-rollouts=$(SCALE_ROLLOUTS) \
		-scale-rollout-pods=$(SCALE_ROLLOUT_PODS) -scale-analysis-count=$(SCALE_ANALYSIS) -scale-manager-args="$(SCALE_MANAGER_ARGS)" -scale-manager-env="$(SCALE_MANAGER_ENV)"

# Pods per controller in bench-node (make test-node runs the same at 6).
NODE_PODS ?= 40

# Controllers bench-compare runs, in order (see test/bench/compare_bench_test.go).
COMPARE ?= stepwise,deployment,kruise,kruise-noqps

.PHONY: kruise-manager
kruise-manager: ## Build OpenKruise v1.9.0's manager into bin/ (for bench-compare; pinned in hack/kruise).
	KWOK_VERSION=$(KWOK_VERSION) CONTROLLER_GEN_VERSION=$(CONTROLLER_GEN_VERSION) hack/test-assets.sh kruise-manager

.PHONY: bench-compare
bench-compare: test-assets kruise-manager ## The same image change of $(PODS) Pods by Stepwise, a Deployment and OpenKruise on one kwok cluster; table, docs/bench-compare.svg.
	$(TEST_GO) test -count=1 ./bench/ -run TestNone -bench BenchmarkCompare -benchtime 1x -timeout 120m \
		-args -pods=$(PODS) -compare=$(COMPARE) -svg=$(CURDIR)/docs/bench-compare.svg -report=$(CURDIR)/docs/bench-compare.md

# bench-smoke's controllers. All three run in CI so that no part of the
# comparison rots; OpenKruise is built first (about 4.5 minutes cold on 2
# cores, skipped when bin/kruise-manager exists) and adds about 25 s.
SMOKE_COMPARE ?= stepwise,deployment,kruise

.PHONY: bench-smoke
bench-smoke: test-assets $(if $(findstring kruise,$(SMOKE_COMPARE)),kruise-manager) ## bench-compare at 20 Pods and bench-scale at 28 (CI: keeps the benchmarks from rotting; about a minute and a half of test time).
	$(TEST_GO) test -count=1 ./bench/ -run TestNone -bench BenchmarkCompare -benchtime 1x -timeout 15m \
		-args -pods=20 -compare=$(SMOKE_COMPARE)
	@# bench-scale at 28 Pods and 2 Rollouts (one Prometheus query each): about 30 s.
	$(TEST_GO) test -count=1 ./bench/ -run TestNone -bench BenchmarkScale -benchtime 1x -timeout 10m \
		-args -scale-clonesets=1 -scale-pods=20 -scale-rollouts=2 -scale-analysis-count=1 -scale-timeout=5m

.PHONY: lint
lint: $(GOLANGCI_LINT) ## gofmt, go vet and golangci-lint.
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	go vet ./...
	$(TEST_GO) vet ./...
	go -C hack/release vet ./...
	$(GOLANGCI_LINT) run ./...
	cd test && $(GOLANGCI_LINT) run ./...
	cd hack/release && $(GOLANGCI_LINT) run ./...

$(GOLANGCI_LINT):
	GOBIN=$(BIN) go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

.PHONY: help
help:
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*?##/ { printf "  %-18s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)
