//go:build tools

// Package tools pins Flux's source-controller; the Makefile builds the module's root main package.
package tools

import _ "github.com/fluxcd/source-controller"
