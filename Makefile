# Stackpilot. `make help` lists the targets; `make demo` runs it on a local control plane;
# `make test` runs every test. The product is the module at the root; dev/ is the dev module
# (test harness, one-node cluster, demo, benchmarks, tool builders), dev/tools/* the tools'.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c

BIN := $(CURDIR)/bin
export PATH := $(BIN):$(PATH)

# One build configuration for every Go build make runs (the tools, the tests,
# the binaries the tests build at run time, the cluster's images): static
# (CGO_ENABLED=0) and -trimpath. A package compiled once is then reused by
# every build that imports it at the same version, where two configurations
# compiled the controller's whole dependency tree twice on a fresh machine
# (once for the tests, once for the image).
export CGO_ENABLED := 0
export GOFLAGS := $(strip $(filter-out -trimpath,$(shell go env GOFLAGS)) -trimpath)

# Pinned tool versions. Each tool is built from a module under dev/tools/; tools
# whose dependencies overlap share one (flux: source- and kustomize-controller
# and cosign; devtools: controller-gen, staticcheck, helm), so those compile once.
K8S_VERSION              := v1.34.3
ETCD_VERSION             := v3.6.13
PULUMI_VERSION           := v3.276.0
PULUMI_YAML_VERSION      := v1.25.0
PULUMI_KUBERNETES_VERSION := 4.25.0
SOURCE_CONTROLLER_VERSION := v1.9.6
KUSTOMIZE_CONTROLLER_VERSION := v1.9.6
# cosign: the version source-controller links (its go.mod), so that one module
# builds both and cosign compiles next to nothing of its own.
COSIGN_VERSION           := v3.0.6
CONTROLLER_TOOLS_VERSION := v0.23.0
STATICCHECK_VERSION      := v0.8.2
HELM_VERSION             := v3.22.0

BUILD_TOOL := dev/hack/build-tool.sh
TOOLS := dev/tools
LDFLAGS := -s -w

# The version stamped into what `build`, `image` and `release` make: the tag
# (v0.3.0) on a release commit, else tag-commits-hash or the commit.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
DIST := $(CURDIR)/dist
CLI_LDFLAGS := $(LDFLAGS) -X main.version=$(VERSION)

.PHONY: all
all: build

.PHONY: help
help: ## List the targets with what they do.
	@awk 'BEGIN { FS = ":.*## " } \
		/^##@/ { printf "\n%s\n", substr($$0, 5); next } \
		/^[a-zA-Z0-9_-]+:.*## / { printf "  %-16s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

##@ Tools

.PHONY: tools
tools: ## Build every pinned tool into bin/ from dev/tools/ (first run on this 2-core machine: about 29 minutes; later runs: no work).
	@# Two lanes at once: on a fresh machine one lane downloads modules or
	@# links (one core) while the other compiles. Each lane builds in order;
	@# the lanes share no tool module, so no package is compiled twice at once.
	@$(MAKE) --no-print-directory -j2 tools-lane-kubernetes tools-lane-pulumi

# The lanes: Kubernetes, Flux with cosign, and the dev tools; Pulumi, its
# plugins, etcd and the npm ones. About even in work on a fresh machine.
.PHONY: tools-lane-kubernetes
tools-lane-kubernetes:
	@$(BUILD_TOOL) kube-apiserver $(K8S_VERSION) $(TOOLS)/kubernetes ./kube-apiserver -ldflags "$(LDFLAGS) $(K8S_VERSION_LDFLAGS)"
	@$(BUILD_TOOL) kube-controller-manager $(K8S_VERSION) $(TOOLS)/kubernetes ./kube-controller-manager -ldflags "$(LDFLAGS) $(K8S_VERSION_LDFLAGS)"
	@$(BUILD_TOOL) kube-scheduler $(K8S_VERSION) $(TOOLS)/kubernetes ./kube-scheduler -ldflags "$(LDFLAGS) $(K8S_VERSION_LDFLAGS)"
	@$(BUILD_TOOL) kubelet $(K8S_VERSION) $(TOOLS)/kubernetes ./kubelet -ldflags "$(LDFLAGS) $(K8S_VERSION_LDFLAGS)"
	@$(BUILD_TOOL) kubectl $(K8S_VERSION) $(TOOLS)/kubernetes ./kubectl -ldflags "$(LDFLAGS) $(K8S_VERSION_LDFLAGS)"
	@$(BUILD_TOOL) source-controller $(SOURCE_CONTROLLER_VERSION) $(TOOLS)/flux github.com/fluxcd/source-controller -ldflags "$(LDFLAGS)"
	@dev/hack/flux-crds.sh $(SOURCE_CONTROLLER_VERSION)
	@$(BUILD_TOOL) kustomize-controller $(KUSTOMIZE_CONTROLLER_VERSION) $(TOOLS)/flux github.com/fluxcd/kustomize-controller -ldflags "$(LDFLAGS)"
	@dev/hack/kustomize-crds.sh $(KUSTOMIZE_CONTROLLER_VERSION)
	@$(BUILD_TOOL) cosign $(COSIGN_VERSION) $(TOOLS)/flux github.com/sigstore/cosign/v3/cmd/cosign \
		-ldflags "$(LDFLAGS) -X sigs.k8s.io/release-utils/version.gitVersion=$(COSIGN_VERSION)"
	@$(BUILD_TOOL) controller-gen $(CONTROLLER_TOOLS_VERSION) $(TOOLS)/devtools sigs.k8s.io/controller-tools/cmd/controller-gen -ldflags "$(LDFLAGS)"
	@$(BUILD_TOOL) staticcheck $(STATICCHECK_VERSION) $(TOOLS)/devtools honnef.co/go/tools/cmd/staticcheck -ldflags "$(LDFLAGS)"
	@$(BUILD_TOOL) helm $(HELM_VERSION) $(TOOLS)/devtools helm.sh/helm/v3/cmd/helm \
		-ldflags "$(LDFLAGS) -X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION)"

.PHONY: tools-lane-pulumi
tools-lane-pulumi:
	@dev/hack/gen-kubernetes-schema.sh $(PULUMI_KUBERNETES_VERSION)
	@$(BUILD_TOOL) pulumi-resource-kubernetes $(PULUMI_KUBERNETES_VERSION) $(TOOLS)/pulumi-kubernetes . \
		-ldflags "$(LDFLAGS) -X github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version=$(PULUMI_KUBERNETES_VERSION)"
	@$(BUILD_TOOL) pulumi $(PULUMI_VERSION) $(TOOLS)/pulumi github.com/pulumi/pulumi/pkg/v3/cmd/pulumi \
		-ldflags "$(LDFLAGS) -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$(PULUMI_VERSION)"
	@$(BUILD_TOOL) pulumi-language-yaml $(PULUMI_YAML_VERSION) $(TOOLS)/pulumi-yaml github.com/pulumi/pulumi-yaml/cmd/pulumi-language-yaml \
		-ldflags "$(LDFLAGS) -X github.com/pulumi/pulumi-yaml/pkg/version.Version=$(PULUMI_YAML_VERSION)"
	@$(BUILD_TOOL) etcd $(ETCD_VERSION) $(TOOLS)/etcd . -ldflags "$(LDFLAGS)"
	@dev/hack/npm-tool.sh azurite-blob $(TOOLS)/azurite azurite/dist/src/blob/main.js

# Stamp the Kubernetes version into its binaries (the node reports it; without
# it the kubelet says v0.0.0-master).
K8S_VERSION_LDFLAGS := -X k8s.io/component-base/version.gitVersion=$(K8S_VERSION) \
	-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(word 2,$(subst ., ,$(K8S_VERSION))) \
	-X k8s.io/component-base/version.gitTreeState=clean

.PHONY: system-packages
system-packages: ## Install what the one-node cluster needs from Debian (containerd, runc, CNI plugins) when missing; needs root, else says what the cluster tests will skip.
	@dev/hack/system-packages.sh

##@ Generated code and manifests

CONTROLLER_GEN ?= $(BIN)/controller-gen
CHART := charts/stackpilot

.PHONY: generate
generate: ## Generate the API's deepcopy code (api/**/zz_generated.deepcopy.go).
	$(CONTROLLER_GEN) object:headerFile=dev/hack/boilerplate.go.txt paths=./api/...

.PHONY: manifests
manifests: ## Generate the CRDs (config/crd/bases) and the manager ClusterRole (config/rbac/role.yaml) from markers, render config/default into internal/manifests/stackpilot.yaml (what `stackpilot install` applies), and copy the CRDs, the manager's RBAC rules and config/monitoring into the Helm chart (charts/stackpilot).
	$(CONTROLLER_GEN) rbac:roleName=stackpilot-manager-role crd paths=./... output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	$(BIN)/kubectl kustomize config/default > internal/manifests/stackpilot.yaml
	@# The Helm chart's generated parts, copies of the above (Helm reads no file
	@# outside the chart): the CRDs as config/default renders them (labels
	@# included), the manager's RBAC as controller-gen wrote it, and
	@# config/monitoring's objects. dev/test/chart fails when they are stale.
	awk 'function flush() { if (doc ~ /(^|\n)kind: CustomResourceDefinition\n/) printf "---\n%s", doc; doc = "" } \
		/^---$$/ { flush(); next } { doc = doc $$0 "\n" } END { flush() }' \
		internal/manifests/stackpilot.yaml > $(CHART)/crds/stackpilot.dev.yaml
	cp config/rbac/role.yaml $(CHART)/files/role.yaml
	cp config/monitoring/servicemonitor.yaml config/monitoring/prometheusrule.yaml config/monitoring/dashboard.json $(CHART)/files/

##@ Development

GO_TEST_FLAGS ?= -count=1 -timeout 75m
# As root the one-node cluster must run: a cluster test that would skip fails instead.
REQUIRE_CLUSTER = STACKPILOT_REQUIRE_CLUSTER=$$([[ $$(id -u) == 0 ]] && echo 1 || echo 0)

.PHONY: build
build: ## Build the controller and the CLI (version-stamped) for this machine into dist/.
	go build -o $(DIST)/stackpilot-controller ./cmd/controller
	go build -ldflags "$(CLI_LDFLAGS)" -o $(DIST)/stackpilot ./cmd/stackpilot

.PHONY: test
test: tools system-packages ## Run every test of both modules: unit, end to end, and the install into a one-node cluster (builds the pinned tools and installs containerd first when missing).
	@# Both modules at once: the dev module's long packages (e2e, the
	@# one-node cluster) mostly wait on Pods and Pulumi, and start without
	@# waiting for the product module's. Each runs to its end even if the
	@# other fails; the target fails if either did.
	rc=0; \
	$(REQUIRE_CLUSTER) go test $(GO_TEST_FLAGS) ./... & product=$$!; \
	$(REQUIRE_CLUSTER) go -C dev test $(GO_TEST_FLAGS) ./... & dev=$$!; \
	wait $$product || rc=1; \
	wait $$dev || rc=1; \
	exit $$rc

.PHONY: test-unit
test-unit: ## Run the product module's unit tests; needs no tools (go test -short, and bin/ hidden: tests that need a tool skip).
	@# STACKPILOT_BIN names an empty directory, so a test finds no tool even
	@# when bin/ is built; -short skips the tests that would need one.
	STACKPILOT_BIN=$$(mktemp -d) go test -short $(GO_TEST_FLAGS) ./...

.PHONY: test-e2e
test-e2e: tools ## Run the end-to-end tests (dev/test/e2e): a real control plane, the controller as a process, the real Pulumi engine.
	go -C dev test $(GO_TEST_FLAGS) ./test/e2e

.PHONY: test-cluster
test-cluster: tools system-packages ## Run the install into a one-node cluster (dev/test/cluster; root, else it skips).
	$(REQUIRE_CLUSTER) go -C dev test $(GO_TEST_FLAGS) ./test/cluster

.PHONY: lint
lint: tools ## gofmt, go vet and staticcheck, in both modules.
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	go vet ./...
	go -C dev vet ./...
	$(BIN)/staticcheck ./...
	cd dev && $(BIN)/staticcheck ./...

##@ Release

RELEASE_PLATFORMS := linux/amd64 linux/arm64 darwin/amd64 darwin/arm64

.PHONY: image
image: tools ## Write the controller image (linux/amd64; the builder the one-node cluster uses) as an OCI layout to dist/image, named ghcr.io/stackpilot/stackpilot-controller:VERSION (git describe; what `stackpilot install` of that version installs).
	go -C dev run ./hack/cluster image --version $(VERSION) --out $(DIST)/image

.PHONY: release
release: ## Cross-build the CLI for linux and darwin on amd64 and arm64 into dist/release, with SHA256SUMS.
	rm -rf $(DIST)/release && mkdir -p $(DIST)/release
	@for p in $(RELEASE_PLATFORMS); do \
		os=$${p%/*} arch=$${p#*/}; \
		echo "release: stackpilot-$$os-$$arch"; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch go build -trimpath -ldflags "$(CLI_LDFLAGS)" \
			-o $(DIST)/release/stackpilot-$$os-$$arch ./cmd/stackpilot; \
	done
	cd $(DIST)/release && sha256sum stackpilot-* > SHA256SUMS && cat SHA256SUMS

##@ Demo

DEMO_FLAGS ?=

.PHONY: demo
demo: tools system-packages ## Run Stackpilot with a sample Stack until Ctrl-C: as a Pod in a one-node cluster (root), else as a process (DEMO_FLAGS=--once: exit once it is Ready; --mode=process|cluster).
	go -C dev run ./cmd/stackpilot-demo $(DEMO_FLAGS)

##@ Benchmarks

BENCH_OVERHEAD_FLAGS ?=
BENCH_PROCESSES_FLAGS ?=
BENCH_FLEET_FLAGS ?=
BENCH_MONOREPO_FLAGS ?=
BENCH_JOBS_FLAGS ?=
BENCH_SCALE_FLAGS ?=

.PHONY: bench
bench: tools ## Run the benchmarks in dev/bench/ and print their results: overhead vs bare pulumi, pulumi processes per operation, 100 policy rules over a 500-resource up, a fleet of 1,000 Stacks, a 50-Stack monorepo, the Job executor on the one-node cluster, the dashboard's fleet API over 10,000 Stacks, then 10,000 Stacks on one controller and on 4 shards (about 7 hours on 2 cores, the 10,000 Stacks 6 of them: BENCH_SCALE_FLAGS=-n=1000 for a quick look; builds the pinned tools first when missing; jobs needs root and the cluster's requirements, else says SKIPPED).
	go -C dev run ./bench/overhead $(BENCH_OVERHEAD_FLAGS)
	go -C dev run ./bench/processes $(BENCH_PROCESSES_FLAGS)
	go -C dev run ./bench/policy $(BENCH_POLICY_FLAGS)
	go -C dev run ./bench/fleet $(BENCH_FLEET_FLAGS)
	go -C dev run ./bench/monorepo $(BENCH_MONOREPO_FLAGS)
	go -C dev run ./bench/jobs $(BENCH_JOBS_FLAGS)
	go -C dev run ./bench/dashboard $(BENCH_DASHBOARD_FLAGS)
	go -C dev run ./bench/scale $(BENCH_SCALE_FLAGS)
	go -C dev run ./bench/scale -shards 4 $(BENCH_SCALE_FLAGS)

##@ One-node cluster

# The Pulumi tools in bin/ are static (CGO_ENABLED=0, above), so the controller
# image takes them from there.
CLUSTER_DIR ?= /var/lib/stackpilot/cluster
IMAGE_TAG ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo dev)
CLUSTER := $(BIN)/stackpilot-cluster

.PHONY: cluster-up
cluster-up: tools system-packages ## Start the one-node cluster (root): bin/ control plane + kubelet, containerd, loopback registry; stays up until `make cluster-down`.
	@go -C dev build -o $(CLUSTER) ./hack/cluster
	@$(CLUSTER) up --dir $(CLUSTER_DIR)

.PHONY: cluster-down
cluster-down: ## Stop the one-node cluster and remove everything it left (also after a crash).
	@go -C dev build -o $(CLUSTER) ./hack/cluster
	@$(CLUSTER) down --dir $(CLUSTER_DIR)

.PHONY: images
images: tools ## Build the controller image (controller, runner, static pulumi + plugins) and push it to the cluster's registry; tag = the commit.
	@go -C dev build -o $(CLUSTER) ./hack/cluster
	@$(CLUSTER) images --dir $(CLUSTER_DIR) --tag $(IMAGE_TAG)

.PHONY: cluster-install
cluster-install: images ## Install Stackpilot into the one-node cluster from config/cluster (config/default + loopback specifics) with the image of `make images`.
	@go -C dev build -o $(CLUSTER) ./hack/cluster
	@$(CLUSTER) install --dir $(CLUSTER_DIR) --tag $(IMAGE_TAG)
