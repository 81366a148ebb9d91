//go:build tools

// Package tools pins the developer tools: controller-gen, staticcheck and
// helm (the chart's lint, template, install and upgrade tests). They share
// one module because they share Kubernetes' packages (k8s.io/* v0.37).
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
	_ "honnef.co/go/tools/cmd/staticcheck"
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
)
