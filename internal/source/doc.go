// Package source holds what every source kind (git, oci, flux) shares: the
// typed errors the reconciler uses to choose between stalling, waiting and
// backing off, and helpers that keep credentials out of messages.
//
// The fetchers themselves live in subpackages (source/git, ...).
package source
