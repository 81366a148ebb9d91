//go:build tools

// Package tools pins the developer tools: controller-gen and staticcheck.
package tools

import (
	_ "honnef.co/go/tools/cmd/staticcheck"
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
)
