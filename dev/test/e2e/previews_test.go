package e2e

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/forge/forgetest"
	"github.com/stackpilot/stackpilot/internal/preview"
	"github.com/stackpilot/stackpilot/internal/receiver"
)

const forgeToken = "forge-api-t0ken-5ecret"

// previewFixture is a monorepo of three Stack folders (a/, b/, c/), a Stack
// on each with pull-request previews posting to a recording forge.
type previewFixture struct {
	*fixture
	forge    *forgetest.Server
	repo     string // the forge's name of the repository
	keys     map[string]client.ObjectKey
	first    string
	provider string
}

func newPreviewFixture(t *testing.T, provider string, mutate func(*v1alpha1.Previews)) *previewFixture {
	t.Helper()
	return newPreviewFixtureOf(t, provider, previewTree("1", "1", "1"), mutate)
}

// newPreviewFixtureOf is newPreviewFixture with the repository's first tree.
func newPreviewFixtureOf(t *testing.T, provider string, tree map[string]string, mutate func(*v1alpha1.Previews)) *previewFixture {
	t.Helper()
	ctx := context.Background()
	p := &previewFixture{fixture: newFixture(t), forge: forgetest.New(t, forgeToken), repo: "org/mono", keys: map[string]client.ObjectKey{}, provider: provider}
	p.first = p.git.Commit(t, "mono", "main", tree, "three stacks")
	createSecret(t, p.ns, "forge-token", map[string]string{"token": forgeToken})
	p.start(t)
	for _, name := range []string{"a", "b", "c"} {
		s := p.stack(name, func(s *v1alpha1.Stack) {
			s.Spec.Source.Git.URL = p.git.URL("mono")
			s.Spec.Source.Dir = name
			s.Spec.Previews = &v1alpha1.Previews{Enabled: true, Provider: provider, APIURL: p.forge.APIURL(provider),
				Repository: p.repo, SecretRef: v1alpha1.LocalObjectReference{Name: "forge-token"}}
			if mutate != nil {
				mutate(s.Spec.Previews)
			}
		})
		if err := env.Client.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		p.keys[name] = client.ObjectKeyFromObject(s)
	}
	for _, k := range p.keys {
		waitApplied(t, k, p.first)
	}
	return p
}

// previewTree is the repository with each folder's version.
func previewTree(a, b, c string) map[string]string {
	return map[string]string{
		"a/Pulumi.yaml": folderProgram("mono-a", a),
		"b/Pulumi.yaml": folderProgram("mono-b", b),
		"c/Pulumi.yaml": folderProgram("mono-c", c),
	}
}

// push commits tree as pull request number's head (its own branch, and
// refs/pull/N/head or refs/merge-requests/N/head as the forge keeps it) and
// tells the recording forge which files it changes.
func (p *previewFixture) push(t *testing.T, number int64, tree map[string]string, files ...string) string {
	t.Helper()
	head := p.git.Commit(t, "mono", fmt.Sprintf("pr-%d", number), tree, fmt.Sprintf("pull request %d", number))
	ref := fmt.Sprintf("refs/pull/%d/head", number)
	if p.provider == forgetest.GitLab {
		ref = fmt.Sprintf("refs/merge-requests/%d/head", number)
	}
	p.git.SetRef(t, "mono", ref, head)
	p.forge.SetFiles(p.provider, p.repo, number, files...)
	return head
}

// pull pushes tree as pull request number's head (push) and sends GitHub's
// pull_request event with action through hook; it returns the head.
func (p *previewFixture) pull(t *testing.T, hook, action string, number int64, tree map[string]string, files ...string) string {
	t.Helper()
	head := p.push(t, number, tree, files...)
	postGitHubEvent(t, hook, "pull_request", githubPullEvent(p.git.URL("mono"), action, number, head, "main", false))
	return head
}

// checkpoint is Stack name's checkpoint file, as Pulumi wrote it.
func (p *previewFixture) checkpoint(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(p.dataDir, "state", p.ns, ".pulumi", "stacks", "mono-"+name, name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// waitPreview waits until Stack name's preview of pull request number is
// at head in phase, and returns it.
func (p *previewFixture) waitPreview(t *testing.T, name string, number int64, head string, phase v1alpha1.PreviewPhase) v1alpha1.PullRequestPreview {
	t.Helper()
	var got v1alpha1.PullRequestPreview
	NewWithT(t).Eventually(func(g Gomega) {
		s := getStack(g, p.keys[name])
		var found *v1alpha1.PullRequestPreview
		for i := range s.Status.Previews {
			if s.Status.Previews[i].Number == number {
				found = &s.Status.Previews[i]
			}
		}
		g.Expect(found).NotTo(BeNil(), "no preview of pull request %d in %s's status", number, name)
		g.Expect(found.Head).To(Equal(head))
		g.Expect(found.Phase).To(Equal(phase), "%+v", *found)
		got = *found
	}, 3*time.Minute, 500*time.Millisecond).Should(Succeed())
	return got
}

// githubPullEvent is a GitHub pull_request event body; action "merged" is
// GitHub's "closed" with merged true.
func githubPullEvent(repoURL, action string, number int64, head, base string, fork bool, labels ...string) []byte {
	headRepo := "org/mono"
	if fork {
		headRepo = "someone/mono"
	}
	var ls []map[string]string
	for _, l := range labels {
		ls = append(ls, map[string]string{"name": l})
	}
	merged := action == "merged" // GitHub says "closed", with merged true
	if merged {
		action = "closed"
	}
	body, _ := json.Marshal(map[string]any{
		"action": action, "number": number,
		"pull_request": map[string]any{"number": number, "state": map[bool]string{true: "closed", false: "open"}[action == "closed"], "merged": merged,
			"html_url": fmt.Sprintf("https://github.com/org/mono/pull/%d", number),
			"head":     map[string]any{"sha": head, "ref": fmt.Sprintf("pr-%d", number), "repo": map[string]string{"full_name": headRepo}},
			"base":     map[string]any{"ref": base, "repo": map[string]string{"full_name": "org/mono"}},
			"labels":   ls},
		"repository": map[string]any{"clone_url": repoURL, "html_url": repoURL},
	})
	return body
}

// postGitHubEvent posts a signed GitHub event.
func postGitHubEvent(t *testing.T, url, event string, body []byte) hookResult {
	t.Helper()
	sig := "sha256=" + hex.EncodeToString(receiver.Sign(body, []byte(webhookToken)))
	return post(t, "POST", url, body, "Content-Type", "application/json", "X-GitHub-Event", event, "X-Hub-Signature-256", sig,
		"X-GitHub-Delivery", fmt.Sprintf("d-%d", time.Now().UnixNano()))
}

// contexts are the status contexts set on sha.
func contexts(statuses []forgetest.Status) map[string]bool {
	out := map[string]bool{}
	for _, s := range statuses {
		out[s.Context] = true
	}
	return out
}

// TestPullRequestPreviews: three Stacks on one repository's folders, with
// previews posting to GitHub (the recording forge), reached through a
// Receiver's pull_request events.
//   - A pull request that changes b/ gets exactly one comment and one
//     status context, b's: the comment names the changed property, the
//     status succeeds; a and c record it as not theirs and post nothing.
//   - A second push edits the same comment (never a second one).
//   - A pull request with a program error gets a failure status whose
//     description is the diagnostic's first line.
//   - A fork's pull request runs nothing until it carries the label.
//   - The previews never changed b's checkpoint (byte-identical) nor its
//     ConfigMap; closing a pull request removes its preview from status.
func TestPullRequestPreviews(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	p := newPreviewFixture(t, forgetest.GitHub, nil)
	hook := createReceiver(t, p.ns, p.ctrl, "github", "github", func(r *v1alpha1.Receiver) {
		r.Spec.Events = []string{"push", "pull_request"}
	})
	repoURL := p.git.URL("mono")
	before := p.checkpoint(t, "b")
	runsBefore := p.previewRuns(t)

	// One pull request, changing b/ only.
	head1 := p.push(t, 1, previewTree("1", "2", "1"), "b/Pulumi.yaml")
	r := postGitHubEvent(t, hook, "pull_request", githubPullEvent(repoURL, "opened", 1, head1, "main", false))
	g.Expect(r.Code).To(Equal(200), "%+v", r)
	g.Expect(r.Stacks).To(Equal(3), "each Stack on the repository and branch is asked; each finds out what the pull request changes")
	pb := p.waitPreview(t, "b", 1, head1, v1alpha1.PreviewSucceeded)
	g.Expect(pb.Changes).NotTo(BeNil())
	g.Expect(pb.Changes.Update).To(Equal(int64(1)), "%+v", pb)
	p.waitPreview(t, "a", 1, head1, v1alpha1.PreviewUnaffected)
	p.waitPreview(t, "c", 1, head1, v1alpha1.PreviewUnaffected)
	comments := p.forge.Comments(forgetest.GitHub, p.repo, 1)
	g.Expect(comments).To(HaveLen(1), "one comment, b's")
	g.Expect(comments[0].Body).To(ContainSubstring(preview.Marker(p.ns, "b")))
	g.Expect(comments[0].Body).To(ContainSubstring("`data.version`"))
	g.Expect(comments[0].Body).To(ContainSubstring(head1[:12]))
	statuses := p.forge.Statuses(forgetest.GitHub, p.repo, head1)
	g.Expect(contexts(statuses)).To(Equal(map[string]bool{preview.Context(p.ns, "b"): true}))
	g.Expect(statuses[0].State).To(Equal("pending"))
	g.Expect(statuses[len(statuses)-1].State).To(Equal("success"))
	g.Expect(statuses[len(statuses)-1].Description).To(Equal("preview: 1 to update"))

	// A second push to the same pull request edits b's comment.
	head2 := p.pull(t, hook, "synchronize", 1, previewTree("1", "3", "1"), "b/Pulumi.yaml")
	p.waitPreview(t, "b", 1, head2, v1alpha1.PreviewSucceeded)
	comments = p.forge.Comments(forgetest.GitHub, p.repo, 1)
	g.Expect(comments).To(HaveLen(1), "the comment is edited in place")
	g.Expect(comments[0].Edits).To(Equal(1))
	g.Expect(comments[0].Body).To(ContainSubstring(head2[:12]))
	g.Expect(p.forge.Statuses(forgetest.GitHub, p.repo, head2)).NotTo(BeEmpty())

	// A program error: a failure status with the diagnostic's first line.
	broken := previewTree("1", "1", "1")
	broken["b/Pulumi.yaml"] = strings.Replace(folderProgram("mono-b", "1"), `version: "1"`, "version: ${nowhere.value}", 1)
	head3 := p.pull(t, hook, "opened", 2, broken, "b/Pulumi.yaml")
	failed := p.waitPreview(t, "b", 2, head3, v1alpha1.PreviewFailed)
	g.Expect(failed.Message).To(ContainSubstring("nowhere"))
	st3 := p.forge.Statuses(forgetest.GitHub, p.repo, head3)
	g.Expect(st3[len(st3)-1].State).To(Equal("failure"))
	firstLine, _, _ := strings.Cut(failed.Message, "\n")
	g.Expect(st3[len(st3)-1].Description).To(Equal(firstLine))
	g.Expect(p.forge.Comments(forgetest.GitHub, p.repo, 2)[0].Body).To(ContainSubstring("nowhere"))

	// A fork's pull request: nothing runs until it carries the label.
	runs := p.previewRuns(t)
	head4 := p.push(t, 3, previewTree("1", "4", "1"), "b/Pulumi.yaml")
	postGitHubEvent(t, hook, "pull_request", githubPullEvent(repoURL, "opened", 3, head4, "main", true))
	p.waitPreview(t, "b", 3, head4, v1alpha1.PreviewAwaitingLabel)
	g.Expect(p.previewRuns(t)).To(Equal(runs), "a fork's program ran before it was labelled")
	st4 := p.forge.Statuses(forgetest.GitHub, p.repo, head4)
	g.Expect(st4[len(st4)-1].State).To(Equal("pending"))
	g.Expect(st4[len(st4)-1].Description).To(ContainSubstring(v1alpha1.DefaultForkLabel))
	postGitHubEvent(t, hook, "pull_request", githubPullEvent(repoURL, "labeled", 3, head4, "main", true, v1alpha1.DefaultForkLabel))
	p.waitPreview(t, "b", 3, head4, v1alpha1.PreviewSucceeded)
	g.Expect(p.previewRuns(t)).To(Equal(runs + 1))

	// A policy violation: a failure status with the rule's message, and
	// the finding in the comment. The policy selects every Stack of the
	// namespace; a and c are not previewed (the pull request is not theirs).
	policy := &v1alpha1.StackPolicy{ObjectMeta: metav1.ObjectMeta{Name: "versions", Namespace: p.ns},
		Spec: v1alpha1.StackPolicySpec{Rules: []v1alpha1.PolicyRule{{
			Name: "no-nine", Match: v1alpha1.PolicyMatch{Types: []string{"kubernetes:core/v1:ConfigMap"}},
			Expression: "resource.inputs.data.version != '9'", Message: "version 9 is banned",
		}}}}
	g.Expect(env.Client.Create(ctx, policy)).To(Succeed())
	head5 := p.pull(t, hook, "opened", 4, previewTree("1", "9", "1"), "b/Pulumi.yaml")
	refused := p.waitPreview(t, "b", 4, head5, v1alpha1.PreviewFailed)
	g.Expect(refused.Message).To(ContainSubstring("version 9 is banned"))
	st5 := p.forge.Statuses(forgetest.GitHub, p.repo, head5)
	g.Expect(st5[len(st5)-1].State).To(Equal("failure"))
	g.Expect(st5[len(st5)-1].Description).To(ContainSubstring("version 9 is banned"))
	g.Expect(p.forge.Comments(forgetest.GitHub, p.repo, 4)[0].Body).To(ContainSubstring("version 9 is banned"))
	g.Expect(env.Client.Delete(ctx, policy)).To(Succeed())

	// Nothing of the real stack changed.
	g.Expect(p.checkpoint(t, "b")).To(Equal(before), "a preview changed b's checkpoint")
	var cm corev1.ConfigMap
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: p.ns, Name: "mono-b"}, &cm)).To(Succeed())
	g.Expect(cm.Data["version"]).To(Equal("1"))
	g.Expect(p.previewRuns(t)-runsBefore).To(Equal(5), "b's five previews, and none for a or c")

	// Closing pull request 1 removes its preview and its request.
	postGitHubEvent(t, hook, "pull_request", githubPullEvent(repoURL, "closed", 1, head2, "main", false))
	g.Eventually(func(g Gomega) {
		for _, name := range []string{"a", "b", "c"} {
			s := getStack(g, p.keys[name])
			for _, e := range s.Status.Previews {
				g.Expect(e.Number).NotTo(Equal(int64(1)), "%s still has pull request 1", name)
			}
			g.Expect(s.Annotations).NotTo(HaveKey(v1alpha1.PreviewRequestAnnotationPrefix + "1"))
		}
	}, time.Minute, 500*time.Millisecond).Should(Succeed())
	// What went to the forge holds no secret value: not the forge's token
	// (but in its header), not the passphrase, not the webhook's secret.
	for _, req := range p.forge.Requests() {
		g.Expect(req.Auth).To(Equal("Bearer " + forgeToken))
		g.Expect(req.Code/100).To(Equal(2), "%s %s answered %d", req.Method, req.Path, req.Code)
		for _, secret := range []string{forgeToken, passphrase, webhookToken} {
			g.Expect(req.Body).NotTo(ContainSubstring(secret), "%s %s", req.Method, req.Path)
		}
	}
}

// previewRuns counts the previews that started a runner.
func (p *previewFixture) previewRuns(t *testing.T) int {
	t.Helper()
	n, err := p.ctrl.Metric("stackpilot_pull_request_preview_runs_total")
	if err != nil {
		t.Fatal(err)
	}
	return int(n)
}

// TestPullRequestPreviewsPolled: with spec.previews.pollInterval and no
// webhook, the open merge requests of GitLab (the recording forge) are
// listed through its API: one into main that changes b/ gets b's note and
// commit status (GitLab's "running", then "success"); once it is no longer
// open, its preview leaves the Stacks' status.
func TestPullRequestPreviewsPolled(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	p := newPreviewFixture(t, forgetest.GitLab, func(pv *v1alpha1.Previews) {
		pv.PollInterval = &metav1.Duration{Duration: 2 * time.Second}
	})
	head := p.push(t, 4, previewTree("1", "2", "1"), "b/Pulumi.yaml")
	p.forge.SetPulls(forgetest.GitLab, p.repo,
		forgetest.Pull{Number: 4, Head: head, Base: "main"},
		forgetest.Pull{Number: 5, Head: head, Base: "release"}) // another branch: not listed for these Stacks
	p.waitPreview(t, "b", 4, head, v1alpha1.PreviewSucceeded)
	p.waitPreview(t, "a", 4, head, v1alpha1.PreviewUnaffected)
	notes := p.forge.Comments(forgetest.GitLab, p.repo, 4)
	g.Expect(notes).To(HaveLen(1))
	g.Expect(notes[0].Body).To(ContainSubstring(preview.Marker(p.ns, "b")))
	statuses := p.forge.Statuses(forgetest.GitLab, p.repo, head)
	g.Expect(statuses).To(HaveLen(2))
	g.Expect([]string{statuses[0].State, statuses[1].State}).To(Equal([]string{"running", "success"}))
	g.Expect(statuses[1].Context).To(Equal(preview.Context(p.ns, "b")))
	g.Expect(p.previewRuns(t)).To(Equal(1))

	// Merged: no longer listed, so forgotten.
	p.forge.SetPulls(forgetest.GitLab, p.repo)
	g.Eventually(func(g Gomega) {
		for _, name := range []string{"a", "b", "c"} {
			s := getStack(g, p.keys[name])
			g.Expect(s.Status.Previews).To(BeEmpty(), name)
			g.Expect(s.Annotations).NotTo(HaveKey(v1alpha1.PreviewRequestAnnotationPrefix + "4"))
		}
	}, time.Minute, 500*time.Millisecond).Should(Succeed())
	for _, req := range p.forge.Requests() {
		g.Expect(req.Auth).To(Equal(forgeToken), "GitLab's PRIVATE-TOKEN header")
		g.Expect(req.Path).To(HavePrefix("/projects/org%2Fmono/"))
	}
	g.Expect(p.forge.RequestsMatching("GET", `/merge_requests$`)).NotTo(BeEmpty())
}

// TestPullRequestPreviewsGitea: a Gitea Receiver's pull_request event; the
// comment and status go through Gitea's API (its "token" authorization).
// Then `stackpilot preview --revision` previews the same branch on demand.
func TestPullRequestPreviewsGitea(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	p := newPreviewFixture(t, forgetest.Gitea, nil)
	hook := createReceiver(t, p.ns, p.ctrl, "gitea", "gitea", func(r *v1alpha1.Receiver) {
		r.Spec.Events = []string{"pull_request"}
	})
	head := p.push(t, 9, previewTree("2", "1", "1"), "a/Pulumi.yaml", "docs/README.md")
	body := githubPullEvent(p.git.URL("mono"), "opened", 9, head, "main", false)
	r := post(t, "POST", hook, body, "Content-Type", "application/json", "X-Gitea-Event", "pull_request",
		"X-Gitea-Signature", hex.EncodeToString(receiver.Sign(body, []byte(webhookToken))))
	g.Expect(r.Code).To(Equal(200), "%+v", r)
	p.waitPreview(t, "a", 9, head, v1alpha1.PreviewSucceeded)
	p.waitPreview(t, "b", 9, head, v1alpha1.PreviewUnaffected)
	g.Expect(p.forge.Comments(forgetest.Gitea, p.repo, 9)).To(HaveLen(1))
	statuses := p.forge.Statuses(forgetest.Gitea, p.repo, head)
	g.Expect(statuses[len(statuses)-1].State).To(Equal("success"))
	g.Expect(statuses[len(statuses)-1].Context).To(Equal(preview.Context(p.ns, "a")))
	for _, req := range p.forge.Requests() {
		g.Expect(req.Auth).To(Equal("token " + forgeToken))
	}

	// The same preview on demand, from the CLI: the pull request's branch
	// by name, printed like pulumi preview; a revision that does not exist
	// is an error that says so.
	ctrlArgs := []string{"--controller-url", "https://" + p.ctrl.LogsAddr, "--insecure-skip-tls-verify", "--token", stackReaderToken(t, p.ns)}
	out, errOut, code := mustPlanCLI(t, p.ns, append([]string{"preview", "a", "--revision", "pr-9"}, ctrlArgs...)...)
	g.Expect(code).To(Equal(0), errOut)
	g.Expect(out).To(ContainSubstring("[diff: ~data.version]"))
	g.Expect(out).To(ContainSubstring("pr-9@sha1:" + head))
	a := getStack(g, p.keys["a"])
	g.Expect(a.Status.RevisionPreview).NotTo(BeNil())
	g.Expect(a.Status.RevisionPreview.Commit).To(Equal(head))
	_, errOut, code = mustPlanCLI(t, p.ns, append([]string{"preview", "a", "--revision", "no-such-branch"}, ctrlArgs...)...)
	g.Expect(code).To(Equal(1))
	g.Expect(errOut).To(ContainSubstring("no-such-branch"))
	g.Expect(errOut).To(ContainSubstring("failed"))
}

// TestPullRequestMergeAppliesReviewedPlan: the preview of a pull request
// keeps its update plan; after the merge, whose program and inputs are
// those previewed, Stack b (Auto) applies exactly that plan (its up record
// names it and the pull request) and Stack c (Manual) gets it as its
// pending plan without a second preview, applied once approved. The
// reviewed plans are gone once applied; `stackpilot plan --id` prints one
// while it is kept.
func TestPullRequestMergeAppliesReviewedPlan(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	p := newPreviewFixture(t, forgetest.GitHub, nil)
	c := &v1alpha1.Stack{}
	g.Expect(env.Client.Get(ctx, p.keys["c"], c)).To(Succeed())
	c.Spec.Approval = &v1alpha1.Approval{Mode: v1alpha1.ApprovalManual}
	g.Expect(env.Client.Update(ctx, c)).To(Succeed())
	hook := createReceiver(t, p.ns, p.ctrl, "github", "github", func(r *v1alpha1.Receiver) {
		r.Spec.Events = []string{"push", "pull_request"}
	})
	repoURL := p.git.URL("mono")

	tree := previewTree("1", "2", "2")
	head := p.pull(t, hook, "opened", 7, tree, "b/Pulumi.yaml", "c/Pulumi.yaml")
	pb := p.waitPreview(t, "b", 7, head, v1alpha1.PreviewSucceeded)
	pc := p.waitPreview(t, "c", 7, head, v1alpha1.PreviewSucceeded)
	g.Expect(pb.Plan).To(Equal("review-7-" + head[:12]))
	comments := p.forge.Comments(forgetest.GitHub, p.repo, 7)
	g.Expect(comments).To(HaveLen(2), "b's and c's, in the order their previews ended")
	g.Expect(comments).To(ContainElement(HaveField("Body", ContainSubstring("stackpilot plan b -n "+p.ns+" --id "+pb.Plan))))

	out, errOut, code := mustPlanCLI(t, p.ns, "plan", "b", "--id", pb.Plan, "--controller-url", "https://"+p.ctrl.LogsAddr,
		"--insecure-skip-tls-verify", "--token", stackReaderToken(t, p.ns))
	g.Expect(code).To(Equal(0), errOut)
	g.Expect(out).To(ContainSubstring("[diff: ~data.version]"))
	g.Expect(out).To(ContainSubstring("pull/7@sha1:" + head))
	g.Expect(out).To(ContainSubstring("(after the merge) applies exactly it"))

	previewsBefore := p.ctrl.Operations(t, "preview")
	// The merge: the same tree on main (a merge commit of its own).
	merge := p.git.Commit(t, "mono", "main", tree, "Merge pull request #7")
	postGitHubEvent(t, hook, "pull_request", githubPullEvent(repoURL, "merged", 7, head, "main", false))
	postGitHubEvent(t, hook, "push", githubPush(repoURL, "main", merge))

	b := waitApplied(t, p.keys["b"], merge)
	up := b.Status.History[0]
	g.Expect(up.Type).To(Equal(v1alpha1.OperationUp))
	g.Expect(up.Plan).To(Equal(pb.Plan), "the up applied the reviewed plan")
	g.Expect(up.ApprovedBy).To(ContainSubstring("pull request 7"))
	var cm corev1.ConfigMap
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: p.ns, Name: "mono-b"}, &cm)).To(Succeed())
	g.Expect(cm.Data["version"]).To(Equal("2"))

	// c waits with the reviewed plan as its pending plan: no second preview.
	var pending *v1alpha1.PendingPlan
	g.Eventually(func(g Gomega) {
		s := getStack(g, p.keys["c"])
		g.Expect(s.Status.PendingPlan).NotTo(BeNil())
		g.Expect(s.Status.PendingPlan.Revision).To(HaveSuffix(merge))
		pending = s.Status.PendingPlan
	}, 2*time.Minute, 500*time.Millisecond).Should(Succeed())
	g.Expect(pending.Changes.Update).To(Equal(int64(1)))
	g.Expect(p.ctrl.Operations(t, "preview")).To(Equal(previewsBefore), "a second preview ran")
	approve(t, p.keys["c"], pending.ID)
	waitApplied(t, p.keys["c"], merge)
	_ = pc

	// Applied, the reviewed plans are gone.
	g.Eventually(func() []string {
		left, _ := filepath.Glob(filepath.Join(p.dataDir, "review-plans", "*", "review-*"))
		return left
	}, time.Minute, time.Second).Should(BeEmpty())
}

// stackNamedProgram writes one ConfigMap named after the Pulumi stack, as a
// program with review stacks must, so that a review stack and the Stack's
// own do not share objects.
func stackNamedProgram(project, version string) string {
	return strings.Replace(folderProgram(project, version), "name: "+project+"\n        namespace", "name: ${pulumi.stack}-cm\n        namespace", 1)
}

func reviewTree(a, b, c string) map[string]string {
	return map[string]string{
		"a/Pulumi.yaml": stackNamedProgram("mono-a", a),
		"b/Pulumi.yaml": stackNamedProgram("mono-b", b),
		"c/Pulumi.yaml": stackNamedProgram("mono-c", c),
	}
}

// TestPullRequestReviewStacks: with spec.previews.reviewStacks, a pull
// request's head is applied to a stack of its own ("b-pr-1"), its outputs
// in objects of their own, updated on each push; beyond
// maxReviewStacks a pull request gets none (its comment says so); closing
// it destroys the review stack and removes it from the backend. The
// Stack's own stack, objects and checkpoint never change.
func TestPullRequestReviewStacks(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	p := newPreviewFixtureOf(t, forgetest.GitHub, reviewTree("1", "1", "1"), func(pv *v1alpha1.Previews) {
		pv.ReviewStacks = true
		pv.MaxReviewStacks = 1
	})
	hook := createReceiver(t, p.ns, p.ctrl, "github", "github", func(r *v1alpha1.Receiver) {
		r.Spec.Events = []string{"pull_request"}
	})
	repoURL := p.git.URL("mono")
	before := p.checkpoint(t, "b")
	// configMap is the version a ConfigMap holds, "-" when there is none.
	configMap := func(name string) string {
		var cm corev1.ConfigMap
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: p.ns, Name: name}, &cm); err != nil {
			return "-"
		}
		return cm.Data["version"]
	}

	head1 := p.pull(t, hook, "opened", 1, reviewTree("1", "2", "1"), "b/Pulumi.yaml")
	e := p.waitPreview(t, "b", 1, head1, v1alpha1.PreviewSucceeded)
	g.Expect(e.ReviewStack).NotTo(BeNil())
	g.Expect(*e.ReviewStack).To(MatchFields(IgnoreExtras, Fields{"Name": Equal("b-pr-1"), "Head": Equal(head1), "Phase": Equal(v1alpha1.PreviewSucceeded)}))
	g.Expect(configMap("b-pr-1-cm")).To(Equal("2"))
	g.Expect(configMap("b-outputs-pr-1")).To(Equal("2"), "the review stack's outputs")
	g.Expect(configMap("b-cm")).To(Equal("1"))
	g.Expect(p.forge.Comments(forgetest.GitHub, p.repo, 1)[0].Body).To(ContainSubstring("Review stack `b-pr-1`: applied at " + head1[:12]))
	g.Expect(getStack(g, p.keys["b"]).Finalizers).To(ContainElement(v1alpha1.ReviewStackFinalizer))

	head2 := p.pull(t, hook, "synchronize", 1, reviewTree("1", "3", "1"), "b/Pulumi.yaml")
	e = p.waitPreview(t, "b", 1, head2, v1alpha1.PreviewSucceeded)
	g.Expect(e.ReviewStack.Head).To(Equal(head2))
	g.Expect(configMap("b-pr-1-cm")).To(Equal("3"))

	// Over the cap: previewed, no review stack.
	head3 := p.pull(t, hook, "opened", 2, reviewTree("1", "4", "1"), "b/Pulumi.yaml")
	e = p.waitPreview(t, "b", 2, head3, v1alpha1.PreviewSucceeded)
	g.Expect(e.ReviewStack.Phase).To(Equal(v1alpha1.PreviewSkipped))
	g.Expect(configMap("b-pr-2-cm")).To(Equal("-"))
	g.Expect(p.forge.Comments(forgetest.GitHub, p.repo, 2)[0].Body).To(ContainSubstring("No review stack: 1 exist"))

	// Closed: destroyed, removed from the backend, its outputs deleted.
	postGitHubEvent(t, hook, "pull_request", githubPullEvent(repoURL, "closed", 1, head2, "main", false))
	g.Eventually(func(g Gomega) {
		g.Expect(configMap("b-pr-1-cm")).To(Equal("-"), "the review stack's ConfigMap")
		g.Expect(configMap("b-outputs-pr-1")).To(Equal("-"), "the review stack's outputs")
		s := getStack(g, p.keys["b"])
		g.Expect(s.Status.Previews).To(HaveLen(1))
		g.Expect(s.Finalizers).NotTo(ContainElement(v1alpha1.ReviewStackFinalizer), "no review stack is left")
	}, 2*time.Minute, time.Second).Should(Succeed())
	_, err := os.Stat(filepath.Join(p.dataDir, "state", p.ns, ".pulumi", "stacks", "mono-b", "b-pr-1.json"))
	g.Expect(os.IsNotExist(err)).To(BeTrue(), "the review stack's state is still in the backend: %v", err)
	g.Expect(p.checkpoint(t, "b")).To(Equal(before))
	g.Expect(configMap("b-cm")).To(Equal("1"))

	// The cap is free again: the next push to pull request 2 gets one.
	// Then the Stack is deleted: its review stack goes with it.
	head4 := p.pull(t, hook, "synchronize", 2, reviewTree("1", "5", "1"), "b/Pulumi.yaml")
	e = p.waitPreview(t, "b", 2, head4, v1alpha1.PreviewSucceeded)
	g.Expect(e.ReviewStack.Phase).To(Equal(v1alpha1.PreviewSucceeded))
	g.Expect(configMap("b-pr-2-cm")).To(Equal("5"))
	g.Expect(env.Client.Delete(ctx, &v1alpha1.Stack{ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: "b"}})).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, p.keys["b"], &v1alpha1.Stack{}))
	}, 2*time.Minute, time.Second).Should(BeTrue(), "the Stack was not let go")
	g.Expect(configMap("b-pr-2-cm")).To(Equal("-"), "a review stack outlived its Stack")
}

// manyProgram is folderProgram with n ConfigMaps more: a preview of it runs
// for seconds (the provider checks each), long enough to be overtaken.
func manyProgram(project, version string, n int) string {
	var b strings.Builder
	b.WriteString(folderProgram(project, version))
	b.WriteString("variables:\n  unused: x\n")
	prog := b.String()
	var extra strings.Builder
	for i := range n {
		fmt.Fprintf(&extra, "  extra%d:\n    type: kubernetes:core/v1:ConfigMap\n    properties:\n      metadata:\n        name: %s-extra-%d\n        namespace: ${namespace}\n      data:\n        i: \"%d\"\n", i, project, i, i)
	}
	return strings.Replace(prog, "resources:\n", "resources:\n"+extra.String(), 1)
}

// TestPullRequestPreviewCancelled: a newer push cancels the preview of the
// older head, whose status is ended as cancelled and which is never
// commented on; a pull request closed mid-preview leaves nothing behind: no
// status entry, no plan file, no lock.
func TestPullRequestPreviewCancelled(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	p := newPreviewFixture(t, forgetest.GitHub, nil)
	hook := createReceiver(t, p.ns, p.ctrl, "github", "github", func(r *v1alpha1.Receiver) {
		r.Spec.Events = []string{"pull_request"}
	})
	repoURL := p.git.URL("mono")
	slow := previewTree("1", "1", "1")
	slow["b/Pulumi.yaml"] = manyProgram("mono-b", "2", 150)
	waitRunning := func(number int64, head string) {
		t.Helper()
		g.Eventually(func(g Gomega) {
			s := getStack(g, p.keys["b"])
			var e *v1alpha1.PullRequestPreview
			for i := range s.Status.Previews {
				if s.Status.Previews[i].Number == number {
					e = &s.Status.Previews[i]
				}
			}
			g.Expect(e).NotTo(BeNil())
			g.Expect(e.Head).To(Equal(head))
			g.Expect(e.Phase).To(Equal(v1alpha1.PreviewRunning))
		}, 2*time.Minute, 50*time.Millisecond).Should(Succeed())
	}

	head1 := p.pull(t, hook, "opened", 1, slow, "b/Pulumi.yaml")
	waitRunning(1, head1)
	head2 := p.pull(t, hook, "synchronize", 1, previewTree("1", "3", "1"), "b/Pulumi.yaml")
	p.waitPreview(t, "b", 1, head2, v1alpha1.PreviewSucceeded)
	var states []string
	for _, st := range p.forge.Statuses(forgetest.GitHub, p.repo, head1) {
		states = append(states, st.State)
	}
	g.Expect(states).To(Equal([]string{"pending", "error"}), "the older head's preview was cancelled, its status ended")
	comments := p.forge.Comments(forgetest.GitHub, p.repo, 1)
	g.Expect(comments).To(HaveLen(1))
	g.Expect(comments[0].Edits).To(BeZero(), "the older head was never commented on")
	g.Expect(comments[0].Body).To(ContainSubstring(head2[:12]))

	// Closed mid-preview.
	head3 := p.pull(t, hook, "opened", 2, slow, "b/Pulumi.yaml")
	waitRunning(2, head3)
	postGitHubEvent(t, hook, "pull_request", githubPullEvent(repoURL, "closed", 2, head3, "main", false))
	g.Eventually(func(g Gomega) {
		s := getStack(g, p.keys["b"])
		for _, e := range s.Status.Previews {
			g.Expect(e.Number).NotTo(Equal(int64(2)))
		}
		st := p.forge.Statuses(forgetest.GitHub, p.repo, head3)
		g.Expect(st).NotTo(BeEmpty())
		g.Expect(st[len(st)-1].State).To(Equal("error"))
	}, 2*time.Minute, 500*time.Millisecond).Should(Succeed())
	g.Expect(p.forge.Comments(forgetest.GitHub, p.repo, 2)).To(BeEmpty())
	left, _ := filepath.Glob(filepath.Join(p.dataDir, "review-plans", "*", "*review-2-*"))
	g.Expect(left).To(BeEmpty(), "a plan file of the closed pull request")
	locks, _ := filepath.Glob(filepath.Join(p.dataDir, "state", p.ns, ".pulumi", "locks", "*", "*", "*", "*"))
	g.Expect(locks).To(BeEmpty(), "a lock")
}

// TestPullRequestPreviewsBitbucket: a Bitbucket Cloud Receiver's
// pullrequest:created event, whose head commit is abbreviated as
// Bitbucket's are: the controller completes it from the source branch,
// previews it, and posts a comment and a build status through Bitbucket's
// API.
func TestPullRequestPreviewsBitbucket(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	p := newPreviewFixture(t, forgetest.Bitbucket, nil)
	hook := createReceiver(t, p.ns, p.ctrl, "bitbucket", "bitbucket", func(r *v1alpha1.Receiver) {
		r.Spec.Events = []string{"pullrequest:created", "pullrequest:updated"}
	})
	head := p.push(t, 5, previewTree("1", "2", "1"), "b/Pulumi.yaml")
	body, _ := json.Marshal(map[string]any{
		"pullrequest": map[string]any{"id": 5, "state": "OPEN",
			"source":      map[string]any{"branch": map[string]string{"name": "pr-5"}, "commit": map[string]string{"hash": head[:12]}, "repository": map[string]string{"full_name": p.repo}},
			"destination": map[string]any{"branch": map[string]string{"name": "main"}, "repository": map[string]string{"full_name": p.repo}},
			"links":       map[string]any{"html": map[string]string{"href": "https://bitbucket.org/org/mono/pull-requests/5"}}},
		"repository": map[string]any{"links": map[string]any{"html": map[string]string{"href": p.git.URL("mono")}}},
	})
	r := post(t, "POST", hook, body, "Content-Type", "application/json", "X-Event-Key", "pullrequest:created",
		"X-Hub-Signature", "sha256="+hex.EncodeToString(receiver.Sign(body, []byte(webhookToken))))
	g.Expect(r.Code).To(Equal(200), "%+v", r)
	p.waitPreview(t, "b", 5, head, v1alpha1.PreviewSucceeded)
	p.waitPreview(t, "a", 5, head, v1alpha1.PreviewUnaffected)
	g.Expect(p.forge.Comments(forgetest.Bitbucket, p.repo, 5)).To(HaveLen(1))
	var states []string
	for _, st := range p.forge.Statuses(forgetest.Bitbucket, p.repo, head) {
		states = append(states, st.State)
		g.Expect(st.Context).To(Equal(preview.Context(p.ns, "b")))
	}
	g.Expect(states).To(Equal([]string{"INPROGRESS", "SUCCESSFUL"}))
	for _, req := range p.forge.Requests() {
		g.Expect(req.Auth).To(Equal("Bearer " + forgeToken))
		g.Expect(req.Code/100).To(Equal(2), "%s %s answered %d: %s", req.Method, req.Path, req.Code, req.Body)
	}
}
