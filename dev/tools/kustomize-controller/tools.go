//go:build tools

// Package tools pins Flux's kustomize-controller; the Makefile builds the module's root main package.
package tools

import _ "github.com/fluxcd/kustomize-controller"
