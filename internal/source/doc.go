// Package source holds what every source kind (git, oci, flux) shares: the
// Kind interface the Stack reconciler drives them through (kind.go), the
// typed errors the fetchers return so that the reconciler can choose between
// stalling, waiting and backing off, their translation into the reconciler's
// errors (Failure), and helpers that keep credentials out of messages.
//
// Each kind lives in a subpackage (source/git, source/oci, source/flux),
// with its resolver, its fetcher and its Kind (kind.go). Adding a kind is one
// such package plus one line in the controller's sourceKinds().
package source
