package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// OwnerTag is the stack tag with which a Stack claims its Pulumi stack. Tags
// live in the backend with the stack (the DIY backends keep them in a
// .pulumi-tags file beside its state), so the claim survives the controller,
// its data volume and the Stack object itself: a Stack deleted and created
// again under the same namespace/name takes its stack back.
const OwnerTag = "stackpilot:owner"

// maxTagValue is the longest stack tag value Pulumi accepts.
const maxTagValue = 256

// ClaimValue is the tag value for a claim: the claim itself, or, past Pulumi's
// 256 characters (a 63-character namespace and a 253-character name), a prefix
// of it and a hash of the whole, still one value per Stack.
func ClaimValue(claim string) string {
	if len(claim) <= maxTagValue {
		return claim
	}
	sum := sha256.Sum256([]byte(claim))
	suffix := "~" + hex.EncodeToString(sum[:8])
	return claim[:maxTagValue-len(suffix)] + suffix
}

// ClaimedError says the stack belongs to another Stack.
type ClaimedError struct {
	StackName string
	Owner     string
}

func (e *ClaimedError) Error() string {
	return fmt.Sprintf("stack %s is claimed by Stack %s (stack tag %s)", e.StackName, e.Owner, OwnerTag)
}

// tagStore is where the stack's tags are: the tags file of a file:// backend
// (no process), or the CLI.
type tagStore interface {
	readTags() (map[string]string, error)
	setTag(name, value string) error
}

// cliTags reads and writes tags with `pulumi stack tag`, creating the stack
// first when it does not exist yet.
type cliTags struct {
	o   *operation
	ctx context.Context
}

func (c cliTags) readTags() (map[string]string, error) {
	var out string
	err := c.o.withStack(c.ctx, func() (err error) {
		out, err = c.o.cli.run(c.ctx, nil, nil, "stack", "tag", "ls", "--stack", c.o.spec.StackName, "--json")
		return err
	})
	if err != nil {
		return nil, err
	}
	tags := map[string]string{}
	if err := json.Unmarshal([]byte(out), &tags); err != nil {
		return nil, fmt.Errorf("`pulumi stack tag ls --json` printed no JSON object: %w", err)
	}
	return tags, nil
}

func (c cliTags) setTag(name, value string) error {
	_, err := c.o.cli.run(c.ctx, nil, nil, "stack", "tag", "set", name, value, "--stack", c.o.spec.StackName)
	return err
}

// claimStack makes sure that the stack belongs to spec.Claim: an unclaimed stack
// (a new one, or one from before claims) is claimed; a stack claimed by another
// Stack fails with a ClaimedError and is left exactly as it was.
//
// The claim is not atomic where the tags are reached only through the CLI
// (read, set and read back are three processes, and a set rewrites the whole
// tags object): two Stacks claiming a fresh stack at once can interleave so
// that both read back their own tag and both run that first operation. The
// tag then names the one that set it last, and the claim is checked again at
// every operation (operation.claim), so the loser's next operation, whatever
// it is, finds the winner's tag and changes nothing. (A file:// backend's
// tags file is read and written by the runner itself, in microseconds, and
// was always read at every operation.)
func claimStack(store tagStore, spec Spec) (owner string, err error) {
	want := ClaimValue(spec.Claim)
	read := func() (string, bool, error) {
		tags, err := store.readTags()
		if err != nil {
			return "", false, fmt.Errorf("read the stack's tags: %w", err)
		}
		v, ok := tags[OwnerTag]
		return v, ok, nil
	}
	owner, ok, err := read()
	if err != nil {
		return "", err
	}
	if ok && owner == want {
		return owner, nil
	}
	if ok {
		return owner, &ClaimedError{StackName: spec.StackName, Owner: owner}
	}
	if spec.Type == OpOutputs || spec.Review {
		return "", nil // reading and reviewing claim nothing
	}
	if err := store.setTag(OwnerTag, want); err != nil {
		return "", fmt.Errorf("claim the stack (set its tag %s): %w", OwnerTag, err)
	}
	if owner, _, err = read(); err != nil {
		return "", err
	}
	if owner != want {
		return owner, &ClaimedError{StackName: spec.StackName, Owner: owner}
	}
	return owner, nil
}
