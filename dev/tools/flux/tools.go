//go:build tools

// Package tools pins Flux's source-controller and kustomize-controller, and
// the sigstore cosign CLI, in one module: they share most of their
// dependencies (Kubernetes' client, the controller runtime, Flux's pkg
// modules, the cloud SDKs, and sigstore's: source-controller verifies with
// cosign's packages), so on a fresh machine those packages compile once for
// all three. cosign is the version source-controller links, which adds no
// module to the build list. The Makefile builds each main package from here;
// tests check with bin/cosign that our signatures verify with the real cosign
// and that cosign's verify with ours.
package tools

import (
	_ "github.com/fluxcd/kustomize-controller"
	_ "github.com/fluxcd/source-controller"
	_ "github.com/sigstore/cosign/v3/cmd/cosign"
)
