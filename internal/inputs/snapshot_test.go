package inputs

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/stackpilot/stackpilot/internal/runner"
)

func TestInputsSnapshot(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	key := bytes.Repeat([]byte{7}, DigestKeySize)
	r := &Snapshots{Dir: t.TempDir(), Key: StaticDigestKey(key)}
	in := &Inputs{
		Backend:        "file:///state",
		Config:         []runner.ConfigValue{{Key: "color", Value: "blue"}, {Key: "token", Value: "s3cret-config", Secret: true}},
		Env:            map[string]string{"PULUMI_CONFIG_PASSPHRASE": "pass-phrase-1", "PLAIN": "x"},
		ServiceAccount: "deployer",
		Digest:         "hmac-sha256:aaaa",
		// The last is a ServiceAccount token added for one operation.
		Secrets: []string{"s3cret-config", "pass-phrase-1", "token-of-one-op"},
	}
	g.Expect(r.Write(ctx, "uid-1", in)).To(Succeed())

	dir := filepath.Join(r.Dir, "uid-1")
	entries, err := os.ReadDir(dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).To(HaveLen(1))
	info, err := entries[0].Info()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(info.Mode().Perm()).To(Equal(os.FileMode(0o600)))
	raw, err := os.ReadFile(filepath.Join(dir, entries[0].Name()))
	g.Expect(err).NotTo(HaveOccurred())
	for _, v := range []string{"s3cret-config", "pass-phrase-1", "blue", "deployer", "file:///state"} {
		g.Expect(string(raw)).NotTo(ContainSubstring(v), "encrypted")
	}

	got, err := r.Kept(ctx, "uid-1", in.Digest)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Backend).To(Equal(in.Backend))
	g.Expect(got.Config).To(Equal(in.Config))
	g.Expect(got.Env).To(Equal(in.Env))
	g.Expect(got.ServiceAccount).To(Equal("deployer"))
	g.Expect(got.Digest).To(Equal(in.Digest))
	g.Expect(got.Secrets).To(ConsistOf("s3cret-config", "pass-phrase-1"), "the one-operation token is not kept")

	_, err = r.Kept(ctx, "uid-1", "hmac-sha256:bbbb")
	g.Expect(err).To(MatchError(ErrNotKept), "other inputs are not kept")
	_, err = r.Kept(ctx, "uid-2", in.Digest)
	g.Expect(err).To(MatchError(ErrNotKept), "another Stack's are not this one's")

	// Moved to another Stack's folder, the file does not open: it is bound to its Stack.
	g.Expect(os.MkdirAll(filepath.Join(r.Dir, "uid-2"), 0o700)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(r.Dir, "uid-2", entries[0].Name()), raw, 0o600)).To(Succeed())
	_, err = r.Kept(ctx, "uid-2", in.Digest)
	g.Expect(err).To(MatchError(ContainSubstring("cannot be decrypted")))
	// Another digest key cannot read it.
	other := &Snapshots{Dir: r.Dir, Key: StaticDigestKey(bytes.Repeat([]byte{8}, DigestKeySize))}
	_, err = other.Kept(ctx, "uid-1", in.Digest)
	g.Expect(err).To(MatchError(ContainSubstring("cannot be decrypted")))

	// The next successful up keeps its inputs beside the applied ones, and
	// replaces them once the status records it (the controller's data_dir.go).
	next := *in
	next.Digest = "hmac-sha256:cccc"
	g.Expect(r.Write(ctx, "uid-1", &next)).To(Succeed())
	r.Prune(ctx, "uid-1", next.Digest)
	entries, _ = os.ReadDir(dir)
	g.Expect(entries).To(HaveLen(1))
	_, err = r.Kept(ctx, "uid-1", in.Digest)
	g.Expect(err).To(MatchError(ErrNotKept))
	_, err = r.Kept(ctx, "uid-1", next.Digest)
	g.Expect(err).NotTo(HaveOccurred())

	// The finalizer's removal, and rollback turned off (keepInputs).
	g.Expect(dir).To(BeADirectory())
	r.Forget(ctx, "uid-1")
	g.Expect(dir).NotTo(BeADirectory())
}
