// Package inputs owns everything besides the program that a Stack's
// operation depends on: resolving the spec and the Secrets, ConfigMaps,
// ServiceAccount and upstream Stack outputs it references (Resolver), the
// keyed digest of the result (DigestKey), the identity a program acts as
// (Tenancy), scrubbing secret values from messages (Scrub), and the
// encrypted copy of the last applied inputs a rollback needs (Snapshots).
//
// It returns the serror package's typed errors, so the Stack reconciler
// knows whether to stall, wait or retry.
package inputs
