package runner

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	. "github.com/onsi/gomega"
)

// s3Backend is an S3 server on 127.0.0.1 (gofakes3, in memory; it checks no
// signature) with one bucket, and the s3:// backend URL of folder team-a in
// it, as a person would write it for an S3-compatible store: a scheme-less
// endpoint, v1-era path style and SSL parameters. It is stopped when t ends.
func s3Backend(t *testing.T) (*s3mem.Backend, string) {
	t.Helper()
	mem := s3mem.New()
	if err := mem.CreateBucket("state"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(mem).Server())
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	return mem, fmt.Sprintf("s3://state/team-a?endpoint=%s&disableSSL=true&s3ForcePathStyle=true&region=us-east-1", host)
}

// s3Lock writes a lock under key as the CLI's Lock does: the JSON of its
// lockContent, as the object's whole content.
func s3Lock(t *testing.T, mem *s3mem.Backend, key, hostname string, pid int, at time.Time) {
	t.Helper()
	content, err := json.Marshal(struct {
		Pid       int       `json:"pid"`
		Username  string    `json:"username"`
		Hostname  string    `json:"hostname"`
		Timestamp time.Time `json:"timestamp"`
	}{pid, "runner", hostname, at})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mem.PutObject("state", key, map[string]string{"Content-Type": "application/json"},
		bytes.NewReader(content), int64(len(content)), nil); err != nil {
		t.Fatal(err)
	}
}

// s3LockKeys lists the lock keys of every stack in the bucket.
func s3LockKeys(t *testing.T, mem *s3mem.Backend) []string {
	t.Helper()
	list, err := mem.ListBucket("state", &gofakes3.Prefix{}, gofakes3.ListBucketPage{})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, c := range list.Contents {
		if strings.Contains(c.Key, "/.pulumi/locks/") {
			keys = append(keys, c.Key)
		}
	}
	sort.Strings(keys)
	return keys
}

// TestRunS3StaleLockOfAGonePod: as for postgres://, in an s3:// backend whose
// credentials come from Env only.
func TestRunS3StaleLockOfAGonePod(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	e := newE2E(t, lockyProgram)
	mem, backend := s3Backend(t)
	e.backend = backend
	e.env["AWS_ACCESS_KEY_ID"] = "AKIDLOCKTEST"
	e.env["AWS_SECRET_ACCESS_KEY"] = "s3-secret-key-for-locks"
	g.Expect(e.run(e.spec(OpUp)).Outcome).To(Equal(OutcomeSucceeded), "creates the stack")
	started := time.Now().Add(-time.Minute)
	const pod = "locky-op-7c9f2-x8k2p"
	// The URL's path is the prefix of every key of the backend.
	const key = "team-a/.pulumi/locks/organization/locky/dev/6f1c0b52-3c2d-4d5e-9f00-0123456789ab.json"
	gone := &StaleLock{Host: pod, NotBefore: started, HostGone: true}

	s3Lock(t, mem, key, pod, 4242, time.Now())
	locked := e.run(e.spec(OpUp))
	g.Expect(locked.ErrorClass).To(Equal(ErrorLocked))
	g.Expect(locked.Message).To(ContainSubstring("the stack is currently locked by 1 lock(s)"), "the CLI reads it as its lock")

	spec := e.spec(OpUp)
	spec.StaleLock = gone
	cleared := e.run(spec)
	g.Expect(cleared.Outcome).To(Equal(OutcomeSucceeded), cleared.Message)
	g.Expect(cleared.ClearedLocks).To(Equal(1))
	g.Expect(s3LockKeys(t, mem)).To(BeEmpty())

	for _, tc := range []struct {
		name     string
		hostname string
		at       time.Time
		req      StaleLock
		why      string
	}{
		{"another host's", "someone-else", time.Now(), *gone, "not by the interrupted operation's host " + pod},
		{"older than the interrupted operation", pod, started.Add(-time.Hour), *gone, "older than the interrupted operation"},
		{"its Pod may still run", pod, time.Now(), StaleLock{Host: pod, NotBefore: started}, "host " + pod + " may still be running"},
	} {
		s3Lock(t, mem, key, tc.hostname, 4242, tc.at)
		spec := e.spec(OpUp)
		spec.StaleLock = &tc.req
		res := e.run(spec)
		g.Expect(res.Outcome).To(Equal(OutcomeConflict), tc.name)
		g.Expect(res.ErrorClass).To(Equal(ErrorLocked), tc.name)
		g.Expect(res.ClearedLocks).To(BeZero(), tc.name)
		g.Expect(res.Message).To(ContainSubstring("s3://state/"+key), tc.name)
		g.Expect(res.Message).To(ContainSubstring("host "+tc.hostname+", pid 4242"), tc.name)
		g.Expect(res.Message).To(ContainSubstring(tc.why), tc.name)
		g.Expect(res.Message).To(ContainSubstring("pulumi cancel --stack dev"), tc.name)
		g.Expect(s3LockKeys(t, mem)).To(ConsistOf(key), tc.name+": kept")
		if _, err := mem.DeleteObject("state", key); err != nil {
			t.Fatal(err)
		}
	}
}
