package cosign

import "fmt"

// VerificationError is returned by Verify when the artifact has no signature the given keys
// accept. Registry failures (auth, network, not found) are returned as they are, not as a
// VerificationError: they say nothing about the signature.
type VerificationError struct {
	// Reference is the artifact checked, "host/repo@sha256:…".
	Reference string
	// Checked is how many signatures were found and tried against every key.
	Checked int
	// Keys is how many keys were tried.
	Keys int
	// Reason says what failed, for the first signature of each format checked (empty when none
	// was found).
	Reason string
}

func (e *VerificationError) Error() string {
	switch {
	case e.Keys == 0:
		return fmt.Sprintf("no public key to verify %s with: give at least one cosign.pub", e.Reference)
	case e.Checked == 0:
		return fmt.Sprintf("no signature found for %s: sign it with `cosign sign --key` or `stackpilot artifact sign` (checked the Sigstore bundle referrers and the legacy .sig tag)", e.Reference)
	}
	return fmt.Sprintf("no signature of %s verifies with the given keys (%d checked against %d %s): %s",
		e.Reference, e.Checked, e.Keys, plural(e.Keys, "key", "keys"), e.Reason)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
