# Stackpilot. `make demo` runs it on a local control plane; `make test` runs every test.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c

BIN := $(CURDIR)/bin
export PATH := $(BIN):$(PATH)

# Pinned tool versions. Each tool is built from its own module under tools/.
K8S_VERSION              := v1.34.3
ETCD_VERSION             := v3.6.13
PULUMI_VERSION           := v3.276.0
PULUMI_YAML_VERSION      := v1.25.0
PULUMI_KUBERNETES_VERSION := 4.25.0
SOURCE_CONTROLLER_VERSION := v1.9.6
KUSTOMIZE_CONTROLLER_VERSION := v1.9.6
COSIGN_VERSION           := v3.1.3
CONTROLLER_TOOLS_VERSION := v0.23.0
STATICCHECK_VERSION      := v0.8.2

BUILD_TOOL := hack/build-tool.sh
LDFLAGS := -s -w

.PHONY: all
all: build

##@ Tools

.PHONY: tools
tools: ## Build every pinned tool into bin/ (first run here: about 36 minutes; later runs: no work).
	@$(BUILD_TOOL) etcd $(ETCD_VERSION) tools/etcd . -ldflags "$(LDFLAGS)"
	@$(BUILD_TOOL) kube-apiserver $(K8S_VERSION) tools/kubernetes ./kube-apiserver -ldflags "$(LDFLAGS) $(K8S_VERSION_LDFLAGS)"
	@$(BUILD_TOOL) kube-controller-manager $(K8S_VERSION) tools/kubernetes ./kube-controller-manager -ldflags "$(LDFLAGS) $(K8S_VERSION_LDFLAGS)"
	@$(BUILD_TOOL) kube-scheduler $(K8S_VERSION) tools/kubernetes ./kube-scheduler -ldflags "$(LDFLAGS) $(K8S_VERSION_LDFLAGS)"
	@$(BUILD_TOOL) kubelet $(K8S_VERSION) tools/kubernetes ./kubelet -ldflags "$(LDFLAGS) $(K8S_VERSION_LDFLAGS)"
	@$(BUILD_TOOL) kubectl $(K8S_VERSION) tools/kubernetes ./kubectl -ldflags "$(LDFLAGS) $(K8S_VERSION_LDFLAGS)"
	@CGO_ENABLED=0 $(BUILD_TOOL) pulumi $(PULUMI_VERSION) tools/pulumi github.com/pulumi/pulumi/pkg/v3/cmd/pulumi \
		-trimpath -ldflags "$(LDFLAGS) -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$(PULUMI_VERSION)"
	@CGO_ENABLED=0 $(BUILD_TOOL) pulumi-language-yaml $(PULUMI_YAML_VERSION) tools/pulumi-yaml github.com/pulumi/pulumi-yaml/cmd/pulumi-language-yaml \
		-trimpath -ldflags "$(LDFLAGS) -X github.com/pulumi/pulumi-yaml/pkg/version.Version=$(PULUMI_YAML_VERSION)"
	@hack/gen-kubernetes-schema.sh $(PULUMI_KUBERNETES_VERSION)
	@CGO_ENABLED=0 $(BUILD_TOOL) pulumi-resource-kubernetes $(PULUMI_KUBERNETES_VERSION) tools/pulumi-kubernetes . \
		-trimpath -ldflags "$(LDFLAGS) -X github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version=$(PULUMI_KUBERNETES_VERSION)"
	@$(BUILD_TOOL) source-controller $(SOURCE_CONTROLLER_VERSION) tools/source-controller github.com/fluxcd/source-controller -ldflags "$(LDFLAGS)"
	@hack/flux-crds.sh $(SOURCE_CONTROLLER_VERSION)
	@$(BUILD_TOOL) kustomize-controller $(KUSTOMIZE_CONTROLLER_VERSION) tools/kustomize-controller github.com/fluxcd/kustomize-controller -ldflags "$(LDFLAGS)"
	@hack/kustomize-crds.sh $(KUSTOMIZE_CONTROLLER_VERSION)
	@CGO_ENABLED=0 $(BUILD_TOOL) cosign $(COSIGN_VERSION) tools/cosign github.com/sigstore/cosign/v3/cmd/cosign \
		-trimpath -ldflags "$(LDFLAGS) -X sigs.k8s.io/release-utils/version.gitVersion=$(COSIGN_VERSION)"
	@$(BUILD_TOOL) controller-gen $(CONTROLLER_TOOLS_VERSION) tools/devtools sigs.k8s.io/controller-tools/cmd/controller-gen -ldflags "$(LDFLAGS)"
	@$(BUILD_TOOL) staticcheck $(STATICCHECK_VERSION) tools/devtools honnef.co/go/tools/cmd/staticcheck -ldflags "$(LDFLAGS)"

# Stamp the Kubernetes version into its binaries (the node reports it; without
# it the kubelet says v0.0.0-master).
K8S_VERSION_LDFLAGS := -X k8s.io/component-base/version.gitVersion=$(K8S_VERSION) \
	-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(word 2,$(subst ., ,$(K8S_VERSION))) \
	-X k8s.io/component-base/version.gitTreeState=clean

.PHONY: system-packages
system-packages: ## Install what the one-node cluster needs from Debian (containerd, runc, CNI plugins) when missing; needs root, else says what the cluster tests will skip.
	@hack/system-packages.sh

##@ Generated code and manifests

CONTROLLER_GEN ?= $(BIN)/controller-gen

.PHONY: generate
generate: ## Generate the API's deepcopy code (api/**/zz_generated.deepcopy.go).
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...

.PHONY: manifests
manifests: ## Generate the CRDs (config/crd/bases) and the manager ClusterRole (config/rbac/role.yaml) from markers, and render config/default into internal/manifests/stackpilot.yaml (what `stackpilot install` applies).
	$(CONTROLLER_GEN) rbac:roleName=stackpilot-manager-role crd paths=./... output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	$(BIN)/kubectl kustomize config/default > internal/manifests/stackpilot.yaml

##@ Development

GO_TEST_FLAGS ?= -count=1 -timeout 75m

.PHONY: build
build: ## Build the controller and CLI into bin/.
	go build -o $(BIN)/stackpilot-controller ./cmd/controller

.PHONY: test
test: tools system-packages ## Run every test: unit, end to end, and the install into a one-node cluster (builds the pinned tools and installs containerd first when missing).
	@# As root the one-node cluster must run: a cluster test that would skip fails instead.
	STACKPILOT_REQUIRE_CLUSTER=$$([[ $$(id -u) == 0 ]] && echo 1 || echo 0) go test $(GO_TEST_FLAGS) ./...

.PHONY: lint
lint: tools ## gofmt, go vet and staticcheck.
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	go vet ./...
	$(BIN)/staticcheck ./...

##@ Demo

DEMO_FLAGS ?=

.PHONY: demo
demo: tools system-packages ## Run Stackpilot with a sample Stack until Ctrl-C: as a Pod in a one-node cluster (root), else as a process (DEMO_FLAGS=--once: exit once it is Ready; --mode=process|cluster).
	go run ./cmd/stackpilot demo $(DEMO_FLAGS)

##@ Benchmarks

BENCH_OVERHEAD_FLAGS ?=
BENCH_PROCESSES_FLAGS ?=
BENCH_FLEET_FLAGS ?=
BENCH_MONOREPO_FLAGS ?=

.PHONY: bench
bench: tools ## Run the benchmarks in bench/ and print their results: overhead vs bare pulumi, pulumi processes per operation, a fleet of 1,000 Stacks, a 50-Stack monorepo (about 35 minutes on 2 cores, the fleet 33 of them; builds the pinned tools first when missing).
	go run ./bench/overhead $(BENCH_OVERHEAD_FLAGS)
	go run ./bench/processes $(BENCH_PROCESSES_FLAGS)
	go run ./bench/fleet $(BENCH_FLEET_FLAGS)
	go run ./bench/monorepo $(BENCH_MONOREPO_FLAGS)

##@ One-node cluster

# The Pulumi tools in bin/ are static (CGO_ENABLED=0, above), so the controller
# image takes them from there.
CLUSTER_DIR ?= /var/lib/stackpilot/cluster
IMAGE_TAG ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo dev)
CLUSTER := $(BIN)/stackpilot-cluster

.PHONY: cluster-up
cluster-up: tools system-packages ## Start the one-node cluster (root): bin/ control plane + kubelet, containerd, loopback registry; stays up until `make cluster-down`.
	@go build -o $(CLUSTER) ./hack/cluster
	@$(CLUSTER) up --dir $(CLUSTER_DIR)

.PHONY: cluster-down
cluster-down: ## Stop the one-node cluster and remove everything it left (also after a crash).
	@go build -o $(CLUSTER) ./hack/cluster
	@$(CLUSTER) down --dir $(CLUSTER_DIR)

.PHONY: images
images: tools ## Build the controller image (controller, runner, static pulumi + plugins) and push it to the cluster's registry; tag = the commit.
	@go build -o $(CLUSTER) ./hack/cluster
	@$(CLUSTER) images --dir $(CLUSTER_DIR) --tag $(IMAGE_TAG)

.PHONY: cluster-install
cluster-install: images ## Install Stackpilot into the one-node cluster from config/cluster (config/default + loopback specifics) with the image of `make images`.
	@go build -o $(CLUSTER) ./hack/cluster
	@$(CLUSTER) install --dir $(CLUSTER_DIR) --tag $(IMAGE_TAG)
