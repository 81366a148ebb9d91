package runner

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/fsouza/fake-gcs-server/fakestorage"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	. "github.com/onsi/gomega"

	"github.com/stackpilot/stackpilot/internal/testenv"
)

// The object-store backends below each hold bucket "state", and their
// backend URLs name folder team-a in it: the prefix of every key.

// isLockKey: a key under a backend's lock folder.
func isLockKey(key string) bool { return strings.Contains(key, "/.pulumi/locks/") }

// fakeS3 is an S3 server on 127.0.0.1 (gofakes3, in memory; it checks no
// signature).
type fakeS3 struct {
	t   *testing.T
	mem *s3mem.Backend
}

// s3Backend starts one, stopped when t ends, and returns the s3:// backend
// URL as a person would write it for an S3-compatible store: a scheme-less
// endpoint, v1-era path style and SSL parameters.
func s3Backend(t *testing.T) (fakeS3, string) {
	t.Helper()
	mem := s3mem.New()
	if err := mem.CreateBucket("state"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(mem).Server())
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	return fakeS3{t, mem}, fmt.Sprintf("s3://state/team-a?endpoint=%s&disableSSL=true&s3ForcePathStyle=true&region=us-east-1", host)
}

func (s fakeS3) write(key, hostname string, pid int, at time.Time) {
	s.t.Helper()
	content := cliLock(s.t, hostname, pid, at)
	if _, err := s.mem.PutObject("state", key, map[string]string{"Content-Type": "application/json"},
		bytes.NewReader(content), int64(len(content)), nil); err != nil {
		s.t.Fatal(err)
	}
}

func (s fakeS3) keys() []string {
	s.t.Helper()
	list, err := s.mem.ListBucket("state", &gofakes3.Prefix{}, gofakes3.ListBucketPage{})
	if err != nil {
		s.t.Fatal(err)
	}
	var keys []string
	for _, c := range list.Contents {
		if isLockKey(c.Key) {
			keys = append(keys, c.Key)
		}
	}
	sort.Strings(keys)
	return keys
}

func (s fakeS3) remove(key string) {
	s.t.Helper()
	if _, err := s.mem.DeleteObject("state", key); err != nil {
		s.t.Fatal(err)
	}
}

// TestRunS3StaleLockOfAGonePod: as for postgres://, in an s3:// backend whose
// credentials come from Env only.
func TestRunS3StaleLockOfAGonePod(t *testing.T) {
	t.Parallel()
	e := newE2E(t, lockyProgram)
	store, backend := s3Backend(t)
	e.backend = backend
	e.env["AWS_ACCESS_KEY_ID"] = "AKIDLOCKTEST"
	e.env["AWS_SECRET_ACCESS_KEY"] = "s3-secret-key-for-locks"
	NewWithT(t).Expect(e.run(e.spec(OpUp)).Outcome).To(Equal(OutcomeSucceeded), "creates the stack")
	key := goneLockKey("team-a")
	testStaleLockOfAGonePod(t, e, store, key, "s3://state/"+key, "s3-secret-key-for-locks")
}

// fakeGCS is a Google Cloud Storage server on 127.0.0.1 (fake-gcs-server's
// library, in memory, plain HTTP), which the CLI and the runner both reach
// through STORAGE_EMULATOR_HOST, as Google's client libraries do.
type fakeGCS struct {
	t   *testing.T
	srv *fakestorage.Server
}

func gcsBackend(t *testing.T) (fakeGCS, string, string) {
	t.Helper()
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{Scheme: "http", Host: "127.0.0.1", Writer: io.Discard,
		// Its XML API (object reads) answers only requests to this host.
		PublicHost: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: "state"})
	return fakeGCS{t, srv}, "gs://state/team-a", strings.TrimPrefix(srv.URL(), "http://")
}

func (s fakeGCS) write(key, hostname string, pid int, at time.Time) {
	s.t.Helper()
	s.srv.CreateObject(fakestorage.Object{
		ObjectAttrs: fakestorage.ObjectAttrs{BucketName: "state", Name: key, ContentType: "application/json"},
		Content:     cliLock(s.t, hostname, pid, at),
	})
}

func (s fakeGCS) keys() []string {
	s.t.Helper()
	objs, _, err := s.srv.ListObjectsWithOptions("state", fakestorage.ListOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	var keys []string
	for _, o := range objs {
		if isLockKey(o.Name) {
			keys = append(keys, o.Name)
		}
	}
	sort.Strings(keys)
	return keys
}

func (s fakeGCS) remove(key string) {
	s.t.Helper()
	if err := s.srv.Client().Bucket("state").Object(key).Delete(context.Background()); err != nil {
		s.t.Fatal(err)
	}
}

// TestRunGCSStaleLockOfAGonePod: as for postgres://, in a gs:// backend,
// with an access token in Env (GOOGLE_OAUTH_ACCESS_TOKEN, which the CLI
// reads before the application default credentials).
func TestRunGCSStaleLockOfAGonePod(t *testing.T) {
	t.Parallel()
	e := newE2E(t, lockyProgram)
	store, backend, host := gcsBackend(t)
	e.backend = backend
	e.env["STORAGE_EMULATOR_HOST"] = host
	e.env["GOOGLE_OAUTH_ACCESS_TOKEN"] = "ya29.gcs-token-for-locks"
	NewWithT(t).Expect(e.run(e.spec(OpUp)).Outcome).To(Equal(OutcomeSucceeded), "creates the stack")
	key := goneLockKey("team-a")
	testStaleLockOfAGonePod(t, e, store, key, "gs://state/"+key, "ya29.gcs-token-for-locks")
}

// azuriteAccount and azuriteKey are the emulator's well-known development
// account (published by Microsoft for Azurite; no secret).
const (
	azuriteAccount = "devstoreaccount1"
	azuriteKey     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// azurite is Azurite, Microsoft's Azure Storage emulator (bin/azurite-blob,
// pinned in dev/tools/azurite), serving Blob storage on 127.0.0.1 from a
// folder of the test's.
type azurite struct {
	t      *testing.T
	client *azblob.Client
}

func azureBackend(t *testing.T) (azurite, string) {
	t.Helper()
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := testenv.RequireBinaries(bin, "azurite-blob"); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	_ = l.Close()
	dir := t.TempDir()
	cmd := exec.Command(filepath.Join(bin, "azurite-blob"), "--blobHost", "127.0.0.1", "--blobPort", port,
		"--location", dir, "--skipApiVersionCheck", "--disableProductStyleUrl", "--silent")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})

	cred, err := azblob.NewSharedKeyCredential(azuriteAccount, azuriteKey)
	if err != nil {
		t.Fatal(err)
	}
	client, err := azblob.NewClientWithSharedKeyCredential("http://"+addr+"/"+azuriteAccount, cred, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Node starts in seconds, more on a busy machine: wait for the
	// container to be made, or for the emulator to exit.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err = client.CreateContainer(ctx, "state", nil)
		cancel()
		if err == nil {
			break
		}
		select {
		case werr := <-exited:
			t.Fatalf("azurite-blob exited (%v): %s", werr, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("azurite-blob on %s: %v\n%s", addr, err, out.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The emulator's URL form: the account is the URL path's first part.
	return azurite{t, client}, fmt.Sprintf("azblob://state/team-a?localemu=true&domain=%s&protocol=http", addr)
}

func (s azurite) write(key, hostname string, pid int, at time.Time) {
	s.t.Helper()
	if _, err := s.client.UploadBuffer(context.Background(), "state", key, cliLock(s.t, hostname, pid, at), nil); err != nil {
		s.t.Fatal(err)
	}
}

func (s azurite) keys() []string {
	s.t.Helper()
	var keys []string
	pager := s.client.NewListBlobsFlatPager("state", nil)
	for pager.More() {
		page, err := pager.NextPage(context.Background())
		if err != nil {
			s.t.Fatal(err)
		}
		for _, b := range page.Segment.BlobItems {
			if b.Name != nil && isLockKey(*b.Name) {
				keys = append(keys, *b.Name)
			}
		}
	}
	sort.Strings(keys)
	return keys
}

func (s azurite) remove(key string) {
	s.t.Helper()
	if _, err := s.client.DeleteBlob(context.Background(), "state", key, nil); err != nil {
		s.t.Fatal(err)
	}
}

// TestRunAzureStaleLockOfAGonePod: as for postgres://, in an azblob://
// backend whose account and key come from Env (AZURE_STORAGE_ACCOUNT,
// AZURE_STORAGE_KEY, as the CLI reads them).
func TestRunAzureStaleLockOfAGonePod(t *testing.T) {
	t.Parallel()
	e := newE2E(t, lockyProgram)
	store, backend := azureBackend(t)
	e.backend = backend
	e.env["AZURE_STORAGE_ACCOUNT"] = azuriteAccount
	e.env["AZURE_STORAGE_KEY"] = azuriteKey
	NewWithT(t).Expect(e.run(e.spec(OpUp)).Outcome).To(Equal(OutcomeSucceeded), "creates the stack")
	key := goneLockKey("team-a")
	testStaleLockOfAGonePod(t, e, store, key, "azblob://state/"+key, azuriteKey)
}
