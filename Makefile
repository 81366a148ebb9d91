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
CONTROLLER_TOOLS_VERSION := v0.23.0
STATICCHECK_VERSION      := v0.8.2

BUILD_TOOL := hack/build-tool.sh
LDFLAGS := -s -w

.PHONY: all
all: build

##@ Tools

.PHONY: tools
tools: ## Build every pinned tool into bin/ (first run here: about 20 minutes; later runs: no work).
	@$(BUILD_TOOL) etcd $(ETCD_VERSION) tools/etcd . -ldflags "$(LDFLAGS)"
	@$(BUILD_TOOL) kube-apiserver $(K8S_VERSION) tools/kubernetes ./kube-apiserver -ldflags "$(LDFLAGS)"
	@$(BUILD_TOOL) kube-controller-manager $(K8S_VERSION) tools/kubernetes ./kube-controller-manager -ldflags "$(LDFLAGS)"
	@$(BUILD_TOOL) kubectl $(K8S_VERSION) tools/kubernetes ./kubectl -ldflags "$(LDFLAGS)"
	@$(BUILD_TOOL) pulumi $(PULUMI_VERSION) tools/pulumi github.com/pulumi/pulumi/pkg/v3/cmd/pulumi \
		-ldflags "$(LDFLAGS) -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$(PULUMI_VERSION)"
	@$(BUILD_TOOL) pulumi-language-yaml $(PULUMI_YAML_VERSION) tools/pulumi-yaml github.com/pulumi/pulumi-yaml/cmd/pulumi-language-yaml \
		-ldflags "$(LDFLAGS) -X github.com/pulumi/pulumi-yaml/pkg/version.Version=$(PULUMI_YAML_VERSION)"
	@hack/gen-kubernetes-schema.sh $(PULUMI_KUBERNETES_VERSION)
	@$(BUILD_TOOL) pulumi-resource-kubernetes $(PULUMI_KUBERNETES_VERSION) tools/pulumi-kubernetes . \
		-ldflags "$(LDFLAGS) -X github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version=$(PULUMI_KUBERNETES_VERSION)"
	@$(BUILD_TOOL) source-controller $(SOURCE_CONTROLLER_VERSION) tools/source-controller github.com/fluxcd/source-controller -ldflags "$(LDFLAGS)"
	@hack/flux-crds.sh $(SOURCE_CONTROLLER_VERSION)
	@$(BUILD_TOOL) controller-gen $(CONTROLLER_TOOLS_VERSION) tools/devtools sigs.k8s.io/controller-tools/cmd/controller-gen -ldflags "$(LDFLAGS)"
	@$(BUILD_TOOL) staticcheck $(STATICCHECK_VERSION) tools/devtools honnef.co/go/tools/cmd/staticcheck -ldflags "$(LDFLAGS)"

##@ Generated code and manifests

CONTROLLER_GEN ?= $(BIN)/controller-gen

.PHONY: generate
generate: ## Generate the API's deepcopy code (api/**/zz_generated.deepcopy.go).
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...

.PHONY: manifests
manifests: ## Generate the CRDs (config/crd/bases) and the manager ClusterRole (config/rbac/role.yaml) from markers.
	$(CONTROLLER_GEN) rbac:roleName=stackpilot-manager-role crd paths=./... output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac

##@ Development

GO_TEST_FLAGS ?= -count=1 -timeout 75m

.PHONY: build
build: ## Build the controller and CLI into bin/.
	go build -o $(BIN)/stackpilot-controller ./cmd/controller

.PHONY: test
test: tools ## Run every test: unit and end to end (builds the pinned tools first when missing).
	go test $(GO_TEST_FLAGS) ./...

.PHONY: lint
lint: tools ## gofmt, go vet and staticcheck.
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	go vet ./...
	$(BIN)/staticcheck ./...

##@ Demo

DEMO_FLAGS ?=

.PHONY: demo
demo: tools ## Run Stackpilot on a local control plane with a sample Stack until Ctrl-C (DEMO_FLAGS=--once: exit once it is Ready).
	go run ./cmd/stackpilot demo $(DEMO_FLAGS)

##@ Benchmarks

BENCH_OVERHEAD_FLAGS ?=
BENCH_IDLE_FLAGS ?=
BENCH_GIT_FLAGS ?=

.PHONY: bench
bench: ## Run the benchmarks in bench/ and print their results: overhead vs bare pulumi, memory with 500 idle Stacks, Git requests with 100 Stacks (about 20 minutes on 2 cores; needs `make tools`).
	go run ./bench/overhead $(BENCH_OVERHEAD_FLAGS)
	go run ./bench/idle $(BENCH_IDLE_FLAGS)
	go run ./bench/gitrequests $(BENCH_GIT_FLAGS)

##@ One-node cluster (issue 3)

# Stamp the Kubernetes version into the binaries (the node reports it; without
# it the kubelet says v0.0.0-master).
K8S_VERSION_LDFLAGS := -X k8s.io/component-base/version.gitVersion=$(K8S_VERSION) \
	-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(word 2,$(subst ., ,$(K8S_VERSION))) \
	-X k8s.io/component-base/version.gitTreeState=clean

.PHONY: cluster-tools
cluster-tools: ## Build kubelet and kube-scheduler into bin/ (the rest of the cluster comes from `make tools`).
	@$(BUILD_TOOL) kubelet $(K8S_VERSION) tools/kubernetes ./kubelet -ldflags "$(LDFLAGS) $(K8S_VERSION_LDFLAGS)"
	@$(BUILD_TOOL) kube-scheduler $(K8S_VERSION) tools/kubernetes ./kube-scheduler -ldflags "$(LDFLAGS) $(K8S_VERSION_LDFLAGS)"

# Static (CGO_ENABLED=0) builds of the tools that go into the controller image,
# kept apart from the host builds in bin/ (which link libc).
STATIC := static
CLUSTER_DIR ?= /var/lib/stackpilot/cluster
IMAGE_TAG ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo dev)
CLUSTER := $(BIN)/stackpilot-cluster

.PHONY: image-tools
image-tools: ## Build static pulumi, pulumi-language-yaml and pulumi-resource-kubernetes into bin/static/ for the controller image.
	@mkdir -p $(BIN)/$(STATIC) $(BIN)/.stamps/$(STATIC)
	@hack/gen-kubernetes-schema.sh $(PULUMI_KUBERNETES_VERSION)
	@CGO_ENABLED=0 $(BUILD_TOOL) $(STATIC)/pulumi $(PULUMI_VERSION) tools/pulumi github.com/pulumi/pulumi/pkg/v3/cmd/pulumi \
		-trimpath -ldflags "$(LDFLAGS) -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$(PULUMI_VERSION)"
	@CGO_ENABLED=0 $(BUILD_TOOL) $(STATIC)/pulumi-language-yaml $(PULUMI_YAML_VERSION) tools/pulumi-yaml github.com/pulumi/pulumi-yaml/cmd/pulumi-language-yaml \
		-trimpath -ldflags "$(LDFLAGS) -X github.com/pulumi/pulumi-yaml/pkg/version.Version=$(PULUMI_YAML_VERSION)"
	@CGO_ENABLED=0 $(BUILD_TOOL) $(STATIC)/pulumi-resource-kubernetes $(PULUMI_KUBERNETES_VERSION) tools/pulumi-kubernetes . \
		-trimpath -ldflags "$(LDFLAGS) -X github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version=$(PULUMI_KUBERNETES_VERSION)"

.PHONY: cluster-up
cluster-up: cluster-tools ## Start the one-node cluster (root; containerd, runc): bin/ control plane + kubelet, containerd, loopback registry.
	@go build -o $(CLUSTER) ./hack/cluster
	@$(CLUSTER) up --dir $(CLUSTER_DIR)

.PHONY: cluster-down
cluster-down: ## Stop the one-node cluster and remove everything it left (also after a crash).
	@go build -o $(CLUSTER) ./hack/cluster
	@$(CLUSTER) down --dir $(CLUSTER_DIR)

.PHONY: images
images: image-tools ## Build the controller image (controller, runner, static pulumi + plugins) and push it to the cluster's registry; tag = the commit.
	@go build -o $(CLUSTER) ./hack/cluster
	@$(CLUSTER) images --dir $(CLUSTER_DIR) --tag $(IMAGE_TAG)

.PHONY: cluster-install
cluster-install: images ## Install Stackpilot into the one-node cluster from config/cluster (config/default + loopback specifics) with the image of `make images`.
	@go build -o $(CLUSTER) ./hack/cluster
	@$(CLUSTER) install --dir $(CLUSTER_DIR) --tag $(IMAGE_TAG)
