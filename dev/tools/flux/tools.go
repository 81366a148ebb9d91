//go:build tools

// Package tools pins Flux's source-controller and kustomize-controller in one
// module: they share most of their dependencies (Kubernetes' client, the
// controller runtime, Flux's pkg modules, the cloud SDKs), so on a fresh
// machine those packages compile once for both. The Makefile builds each
// module's root main package from here.
package tools

import (
	_ "github.com/fluxcd/kustomize-controller"
	_ "github.com/fluxcd/source-controller"
)
