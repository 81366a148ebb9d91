package stack

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"

	"github.com/stackpilot/stackpilot/internal/artifact"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// policyPacksDir is where, in an operation's tree, spec.policyPacks are
// placed: the runner Pod receives one tree by digest, so the packs travel
// inside it, beside the program.
const policyPacksDir = ".stackpilot-policy-packs"

// errPolicyPack marks what fetching spec.policyPacks failed on: the
// operation fails with runner.ErrorPolicyPack (PolicyPackFailed).
type errPolicyPack struct{ err error }

func (e *errPolicyPack) Error() string { return e.err.Error() }
func (e *errPolicyPack) Unwrap() error { return e.err }

// withPolicyPacks fetches spec.policyPacks for an up or a preview and
// returns the tree the operation runs: the program's, with each pack's
// folder under policyPacksDir/<name>, stored once per program and packs
// (the artifact index remembers the combination), and the packs as the
// runner takes them, their Dir relative to the tree. Each pack's source is
// resolved as a program source is, through the same kinds (one ls-remote
// shared with every Stack on that repository and ref, credentials from the
// Stack's namespace), so a new revision of a pack applies from the next
// operation on.
func (r *StackReconciler) withPolicyPacks(ctx context.Context, st *reconcileState, typ runner.OperationType, art artifact.Artifact) (artifact.Artifact, []runner.PolicyPack, error) {
	packs := st.stack.Spec.PolicyPacks
	if len(packs) == 0 || (typ != runner.OpUp && typ != runner.OpPreview) {
		return art, nil, nil
	}
	type fetched struct {
		art artifact.Artifact
		dir string
	}
	got := make([]fetched, len(packs))
	key := sha256.New()
	fmt.Fprintf(key, "policy-packs\x00%s\x00", art.Digest)
	for i, p := range packs {
		synthetic := st.stack.DeepCopy()
		synthetic.Spec.Source = p.Source
		kind := r.Sources.Of(synthetic)
		if kind == nil {
			return art, nil, &errPolicyPack{fmt.Errorf("spec.policyPacks[%s].source: set one of git, oci or sourceRef", p.Name)}
		}
		resolved, err := kind.Resolve(ctx, synthetic, r.resolveRequest(st.stack))
		if err != nil {
			return art, nil, &errPolicyPack{fmt.Errorf("spec.policyPacks[%s]: %w", p.Name, err)}
		}
		a, err := resolved.Fetch(ctx)
		if err != nil {
			return art, nil, &errPolicyPack{fmt.Errorf("spec.policyPacks[%s]: fetching %s: %w", p.Name, resolved.Revision, err)}
		}
		dir, err := artifact.SubdirPath(a.Path, p.Source.Dir)
		if err == nil {
			_, err = os.Stat(filepath.Join(dir, "PulumiPolicy.yaml"))
		}
		if err != nil {
			return art, nil, &errPolicyPack{fmt.Errorf("spec.policyPacks[%s]: revision %s has no policy pack in %q (a folder with PulumiPolicy.yaml): %w",
				p.Name, resolved.Revision, orRoot(p.Source.Dir), err)}
		}
		got[i] = fetched{art: a, dir: p.Source.Dir}
		fmt.Fprintf(key, "%s\x00%s\x00%s\x00", p.Name, a.Digest, p.Source.Dir)
	}
	out := make([]runner.PolicyPack, len(packs))
	for i, p := range packs {
		out[i] = runner.PolicyPack{Name: p.Name, Dir: path.Join(policyPacksDir, p.Name)}
		if p.Config != nil {
			out[i].Config = append([]byte(nil), p.Config.Raw...)
		}
	}
	indexKey := hex.EncodeToString(key.Sum(nil))
	if d, ok := r.Artifacts.Lookup(indexKey); ok {
		if a, ok := r.Artifacts.Get(d); ok {
			return a, out, nil
		}
	}
	tmp, err := r.Artifacts.TempDir("packs-")
	if err != nil {
		return art, nil, err
	}
	defer os.RemoveAll(tmp)
	tree := filepath.Join(tmp, "tree")
	if err := r.Artifacts.CopyTree(ctx, art, "", tree); err != nil {
		return art, nil, err
	}
	if _, err := os.Lstat(filepath.Join(tree, policyPacksDir)); !errors.Is(err, os.ErrNotExist) {
		return art, nil, &errPolicyPack{fmt.Errorf("the program's source holds %s, where spec.policyPacks are placed: rename it", policyPacksDir)}
	}
	for i, p := range packs {
		if err := r.Artifacts.CopyTree(ctx, got[i].art, got[i].dir, filepath.Join(tree, policyPacksDir, p.Name)); err != nil {
			return art, nil, &errPolicyPack{fmt.Errorf("spec.policyPacks[%s]: %w", p.Name, err)}
		}
	}
	composed, err := r.Artifacts.Put(ctx, tree)
	if err != nil {
		return art, nil, &errPolicyPack{fmt.Errorf("spec.policyPacks: %w", err)}
	}
	if err := r.Artifacts.Link(indexKey, composed.Digest); err != nil {
		return art, nil, err
	}
	return composed, out, nil
}

// policyPackClass is the runner's error class of a withPolicyPacks error.
func policyPackClass(err error) runner.ErrorClass {
	if _, ok := errors.AsType[*errPolicyPack](err); ok {
		return runner.ErrorPolicyPack
	}
	return runner.ErrorInternal
}

func orRoot(dir string) string {
	if dir == "" {
		return "."
	}
	return dir
}
