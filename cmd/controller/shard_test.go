package main

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/labels"
)

// --watch-label-selector takes Flux's sharding selectors; one that does not
// parse stops the start, saying what to write; empty serves everything.
func TestParseWatchSelector(t *testing.T) {
	g := NewWithT(t)
	sel, err := parseWatchSelector("")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sel).To(BeNil())

	shard, err := parseWatchSelector("sharding.fluxcd.io/key in (shard1)")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(shard.Matches(labels.Set{"sharding.fluxcd.io/key": "shard1"})).To(BeTrue())
	g.Expect(shard.Matches(labels.Set{})).To(BeFalse())

	main, err := parseWatchSelector("!sharding.fluxcd.io/key")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(main.Matches(labels.Set{})).To(BeTrue())
	g.Expect(main.Matches(labels.Set{"sharding.fluxcd.io/key": "shard1"})).To(BeFalse())

	for _, bad := range []string{"sharding.fluxcd.io/key in shard1", "a=b=c", "!!x", "key in (a"} {
		_, err := parseWatchSelector(bad)
		g.Expect(err).To(MatchError(ContainSubstring("--watch-label-selector")), bad)
		g.Expect(err).To(MatchError(ContainSubstring("sharding.fluxcd.io/key in (shard1)")), bad)
	}
}

// Each shard elects its own leader: the Lease is named after the selector
// (the same for every replica of a shard, however its terms are ordered),
// the unsharded controller keeps its Lease, and the flag wins.
func TestLeaderElectionIDPerShard(t *testing.T) {
	g := NewWithT(t)
	parse := func(s string) labels.Selector {
		sel, err := parseWatchSelector(s)
		g.Expect(err).NotTo(HaveOccurred())
		return sel
	}
	g.Expect(leaderElectionID("", nil)).To(Equal("stackpilot-controller-leader"))
	one := leaderElectionID("", parse("sharding.fluxcd.io/key in (shard1)"))
	two := leaderElectionID("", parse("sharding.fluxcd.io/key in (shard2)"))
	main := leaderElectionID("", parse("!sharding.fluxcd.io/key"))
	g.Expect(one).To(HavePrefix("stackpilot-controller-leader-"))
	g.Expect([]string{one, two, main}).To(HaveLen(3))
	g.Expect(one).NotTo(Equal(two))
	g.Expect(one).NotTo(Equal(main))
	g.Expect(leaderElectionID("", parse("a=1,b=2"))).To(Equal(leaderElectionID("", parse("b=2, a=1"))))
	g.Expect(len(one)).To(BeNumerically("<=", 63))
	g.Expect(leaderElectionID("mine", parse("a=1"))).To(Equal("mine"))
	// The Helm chart names a shard's runner Secret from its selector the
	// same way, to grant it by name (templates/manager-rolebinding.yaml;
	// dev/test/chart's TestShardRunnerSecretsGrantedByName): changing the
	// name here needs the same change there.
	g.Expect(one).To(Equal("stackpilot-controller-leader-7ee98f291c"))
	g.Expect(runnerCertSecretName(one)).To(Equal("stackpilot-runner-tls-7ee98f291c"))
}

// Each shard keeps the runner certificate of its own Service in a Secret of
// its own, named after its Lease; the main controller's has the plain name.
func TestRunnerCertSecretName(t *testing.T) {
	for lease, want := range map[string]string{
		defaultLeaderElectionID:                 "stackpilot-runner-tls",
		defaultLeaderElectionID + "-0123456789": "stackpilot-runner-tls-0123456789",
	} {
		if got := runnerCertSecretName(lease); got != want {
			t.Errorf("%s: got %s, want %s", lease, got, want)
		}
	}
	if a, b := runnerCertSecretName("lease-a"), runnerCertSecretName("lease-b"); a == b {
		t.Errorf("two Leases share the Secret %s", a)
	}
}
