package testenv

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// S3 is an S3-compatible object store on 127.0.0.1 (gofakes3, in memory),
// for Flux Buckets with the generic provider. It checks no signatures: any
// credentials, or none, are accepted.
type S3 struct {
	backend *s3mem.Backend
	srv     *httptest.Server
}

// NewS3 starts an S3 server with the given buckets, stopped when t ends.
func NewS3(t TB, buckets ...string) *S3 {
	t.Helper()
	b := s3mem.New()
	for _, name := range buckets {
		if err := b.CreateBucket(name); err != nil {
			t.Fatalf("s3: create bucket %s: %v", name, err)
		}
	}
	s := &S3{backend: b, srv: httptest.NewServer(gofakes3.New(b).Server())}
	t.Cleanup(s.srv.Close)
	return s
}

// Host is the endpoint's host:port.
func (s *S3) Host() string { return strings.TrimPrefix(s.srv.URL, "http://") }

// Put writes an object with an S3 PUT, as a client would (the server then
// records its Last-Modified time and ETag).
func (s *S3) Put(t TB, bucket, key, content string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, s.srv.URL+"/"+bucket+"/"+key, bytes.NewReader([]byte(content)))
	if err != nil {
		t.Fatalf("s3: put %s/%s: %v", bucket, key, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("s3: put %s/%s: %v", bucket, key, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("s3: put %s/%s: %s: %s", bucket, key, resp.Status, b)
	}
}
