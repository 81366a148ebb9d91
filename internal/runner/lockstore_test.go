package runner

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/lib/pq"
	. "github.com/onsi/gomega"
)

func TestLockKeyOf(t *testing.T) {
	for _, tc := range []struct {
		key  string
		want bool
	}{
		{".pulumi/locks/organization/web/dev/6f1c.json", true},
		{".pulumi/locks/dev/6f1c.json", true}, // a legacy stack
		{".pulumi/locks/organization/web/prod/6f1c.json", false},
		{".pulumi/locks/organization/app/dev/6f1c.json", false},
		{".pulumi/locks/organization/web/dev/6f1c.json.attrs", false},
		{".pulumi/stacks/web/dev.json", false},
		{"x/.pulumi/locks/organization/web/dev/6f1c.json", false}, // another prefix's
	} {
		NewWithT(t).Expect(lockKeyOf(tc.key, "web", "dev")).To(Equal(tc.want), tc.key)
	}
}

func TestBucketPrefixAndPublicBackend(t *testing.T) {
	g := NewWithT(t)
	for raw, want := range map[string]string{
		"s3://state":                     "",
		"s3://state/":                    "",
		"s3://state/team-a?region=x":     "team-a/",
		"s3://state/a/b/":                "a/b/",
		"postgres://u:p@db:5432/pulumi":  "pulumi/",
		"postgres://db/state?table=my_t": "state/",
	} {
		u, err := url.Parse(raw)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(bucketPrefix(u)).To(Equal(want), raw)
	}
	g.Expect(publicBackend("postgres://app:s3cret@db:5432/state?sslmode=disable&password=p4ss")).
		To(Equal("postgres://db:5432/state"))
	g.Expect(publicBackend("s3://state/team-a?endpoint=minio:9000")).To(Equal("s3://state/team-a"))
}

// TestPQConnString: the URL wins over Env's PG* variables, which win over
// the runner's own environment, as for the CLI, whose environment is the
// runner's with Env over it.
func TestPQConnString(t *testing.T) {
	g := NewWithT(t)
	t.Setenv("PGUSER", "from-process")
	t.Setenv("PGDATABASE", "process-db")
	t.Setenv("PGSSLMODE", "verify-full")
	u, _ := url.Parse("postgres://db.example:6543/state?sslmode=disable")
	cfg, err := pq.NewConfig(pqConnString(u, map[string]string{
		"PGPASSWORD": "it's a \\ secret", "PGSSLMODE": "require", "PGUSER": "from-env", "OTHER": "x"}))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.Host).To(Equal("db.example"))
	g.Expect(cfg.Port).To(BeEquivalentTo(6543))
	g.Expect(cfg.Database).To(Equal("state"), "the URL's")
	g.Expect(cfg.SSLMode).To(BeEquivalentTo("disable"), "the URL's")
	g.Expect(cfg.User).To(Equal("from-env"), "Env's, over the process's")
	g.Expect(cfg.Password).To(Equal("it's a \\ secret"), "quoted")

	u, _ = url.Parse("postgres://")
	cfg, err = pq.NewConfig(pqConnString(u, map[string]string{"PGHOST": "10.0.0.7"}))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.Host).To(Equal("10.0.0.7"))
	g.Expect(cfg.Database).To(Equal("process-db"), "the process's when neither says")
	g.Expect(cfg.SSLMode).To(BeEquivalentTo("verify-full"))
}

func TestTranslateLegacyS3Params(t *testing.T) {
	g := NewWithT(t)
	none := func(string) string { return "" }
	out, err := translateLegacyS3Params("s3://b/p?endpoint=minio:9000&disableSSL=true&s3ForcePathStyle=true", none)
	g.Expect(err).NotTo(HaveOccurred())
	u, _ := url.Parse(out)
	g.Expect(u.Query()).To(Equal(url.Values{
		"endpoint": {"http://minio:9000"}, "disable_https": {"true"}, "s3ForcePathStyle": {"true"},
		"request_checksum_calculation": {"when_required"}}))
	out, _ = translateLegacyS3Params("s3://b?endpoint=https://s3.local", func(k string) string {
		if k == "AWS_REQUEST_CHECKSUM_CALCULATION" {
			return "when_supported"
		}
		return ""
	})
	g.Expect(out).To(Equal("s3://b?endpoint=https://s3.local"), "told otherwise by the environment")
	out, _ = translateLegacyS3Params("s3://b?region=eu-west-1", none)
	g.Expect(out).To(Equal("s3://b?region=eu-west-1"))
}

// TestGCSLockStoreSaysWhatTheServiceRefused: a refusal of Cloud Storage
// reaches the operation's message with the service's own words; an emulator
// (STORAGE_EMULATOR_HOST) is sent no credential, as by Google's libraries.
func TestGCSLockStoreSaysWhatTheServiceRefused(t *testing.T) {
	g := NewWithT(t)
	var auth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"error":{"code":403,"message":"runner@p.iam.gserviceaccount.com does not have storage.objects.list access"}}`))
	}))
	defer srv.Close()
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(srv.URL, "http://"))
	s, err := openLockStore(context.Background(), Spec{Backend: "gs://state/team-a", StackName: "dev",
		Env: map[string]string{"GOOGLE_OAUTH_ACCESS_TOKEN": "ya29.secret-token"}}, "web")
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { g.Expect(s.close()).To(Succeed()) }()
	_, err = s.locks(context.Background())
	g.Expect(err).To(MatchError(ContainSubstring("stale lock: list the locks of gs://state/team-a: the Cloud Storage API answered 403 Forbidden: runner@p.iam.gserviceaccount.com does not have storage.objects.list access")))
	g.Expect(err.Error()).NotTo(ContainSubstring("ya29"))
	g.Expect(auth).To(BeEmpty(), "an emulator gets no credentials")
}

// TestGCSLockStoreNamesABadCredential: a GOOGLE_CREDENTIALS that is no
// credentials JSON is named, its content never repeated.
func TestGCSLockStoreNamesABadCredential(t *testing.T) {
	g := NewWithT(t)
	t.Setenv("STORAGE_EMULATOR_HOST", "")
	_, err := openLockStore(context.Background(), Spec{Backend: "gs://state", StackName: "dev",
		Env: map[string]string{"GOOGLE_CREDENTIALS": "not-json-but-a-s3cret"}}, "web")
	g.Expect(err).To(MatchError(ContainSubstring("stale lock: open the backend gs://state: GOOGLE_CREDENTIALS does not hold a credentials JSON")))
	g.Expect(err.Error()).NotTo(ContainSubstring("s3cret"))
}
