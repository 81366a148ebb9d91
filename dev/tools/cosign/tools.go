//go:build tools

// Package tools pins the sigstore cosign CLI; the Makefile builds its cmd/cosign package into
// bin/cosign so tests can check that our signatures verify with the real cosign and that
// cosign's signatures verify with ours.
package tools

import _ "github.com/sigstore/cosign/v3/cmd/cosign"
