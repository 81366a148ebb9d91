package oci

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stackpilot/stackpilot/internal/testenv"
)

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func TestCredentialsFromDockerConfigJSON(t *testing.T) {
	for _, tc := range []struct {
		name, data, registry string
		want                 *Credentials // registry filled in below
		err                  string
	}{
		{name: "auth", data: `{"auths":{"reg.example:5000":{"auth":"` + b64("bob:pa:ss") + `"}}}`, registry: "reg.example:5000",
			want: &Credentials{username: "bob", password: "pa:ss"}},
		{name: "user/pass and https key", data: `{"auths":{"https://reg.example/v2/":{"username":"bob","password":"pw"}}}`, registry: "reg.example",
			want: &Credentials{username: "bob", password: "pw"}},
		{name: "identity token", data: `{"auths":{"reg.example":{"auth":"` + b64("<token>:") + `","identitytoken":"refresh"}}}`, registry: "reg.example",
			want: &Credentials{username: "<token>", identityToken: "refresh"}},
		{name: "docker hub alias", data: `{"auths":{"https://index.docker.io/v1/":{"auth":"` + b64("u:p") + `"}}}`, registry: "docker.io",
			want: &Credentials{username: "u", password: "p"}},
		{name: "old dockercfg", data: `{"reg.example":{"auth":"` + b64("u:p") + `"}}`, registry: "reg.example",
			want: &Credentials{username: "u", password: "p"}},
		{name: "other host", data: `{"auths":{"other.example":{"auth":"` + b64("u:p") + `"}}}`, registry: "reg.example"},
		{name: "bad base64", data: `{"auths":{"reg.example":{"auth":"hunter2!!"}}}`, registry: "reg.example", err: `"auth" is not base64`},
		{name: "no colon", data: `{"auths":{"reg.example":{"auth":"` + b64("hunter2") + `"}}}`, registry: "reg.example", err: "does not decode to USERNAME:PASSWORD"},
		{name: "bad json", data: `{"auths":{"reg.example":{"password":hunter2}}}`, registry: "reg.example", err: "syntax error at byte"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := CredentialsFromDockerConfigJSON([]byte(tc.data), tc.registry)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || strings.Contains(err.Error(), "hunter2") {
					t.Fatalf("err = %v, want it to contain %q and no secret", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.want != nil {
				tc.want.registry = tc.registry
			}
			if (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
				t.Fatalf("got %#v (%+v), want %+v", got, deref(got), deref(tc.want))
			}
		})
	}
}

func deref(c *Credentials) any {
	if c == nil {
		return nil
	}
	return struct{ R, U, P, I, T string }{c.registry, c.username, c.password, c.identityToken, c.registryToken}
}

func TestCredentialsNeverPrinted(t *testing.T) {
	c, err := CredentialsFromDockerConfigJSON([]byte(`{"auths":{"reg.example":{"auth":"`+b64("bob:hunter2")+`"}}}`), "reg.example")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"%v", "%+v", "%#v", "%s"} {
		if s := fmt.Sprintf(f, c); strings.Contains(s, "hunter2") || strings.Contains(s, "bob") || !strings.Contains(s, "reg.example") {
			t.Errorf("%s gives %q", f, s)
		}
	}
	other, _ := CredentialsFromUserPass("bob:hunter3")
	same, _ := CredentialsFromUserPass("bob:hunter2")
	if c.ID() == "" || c.ID() != same.ID() || c.ID() == other.ID() || strings.Contains(c.ID(), "hunter") {
		t.Errorf("ID: %q %q %q", c.ID(), same.ID(), other.ID())
	}
	var anon *Credentials
	if anon.ID() != "" || anon.String() != "<anonymous>" {
		t.Errorf("anonymous: %q %q", anon.ID(), anon.String())
	}
	if _, err := CredentialsFromUserPass("nocolon"); err == nil || strings.Contains(err.Error(), "nocolon") {
		t.Errorf("user:pass without colon: %v", err)
	}
}

func TestCredentialsFromDockerConfigFile(t *testing.T) {
	cfgDir := t.TempDir()
	t.Setenv("DOCKER_CONFIG", cfgDir)
	t.Setenv("HOME", t.TempDir())
	// A credential helper, found on PATH as Docker does.
	binDir := t.TempDir()
	helper := "#!/bin/sh\nread server\nprintf '{\"ServerURL\":\"%s\",\"Username\":\"helped\",\"Secret\":\"from-helper\"}' \"$server\"\n"
	if err := os.WriteFile(filepath.Join(binDir, "docker-credential-fake"), []byte(helper), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", binDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	cfg := `{"auths":{"plain.example":{"auth":"` + b64("u:p") + `"}},"credHelpers":{"helped.example":"fake"}}`
	if err := os.WriteFile(filepath.Join(cfgDir, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	for reg, want := range map[string][2]string{"plain.example": {"u", "p"}, "helped.example": {"helped", "from-helper"}} {
		c, err := CredentialsFromDockerConfigFile(reg)
		if err != nil || c == nil || c.username != want[0] || c.password != want[1] {
			t.Errorf("%s: %v, %v; want %v", reg, deref(c), err, want)
		}
	}
	if c, err := CredentialsFromDockerConfigFile("none.example"); c != nil || err != nil {
		t.Errorf("no entry: %v, %v", deref(c), err)
	}
}

func TestRegistryCredentials(t *testing.T) {
	ctx := context.Background()
	reg := testenv.NewRegistry(t, testenv.WithRegistryBasicAuth("bob", "right-password"))
	r := ref(reg, "private/app:v1")
	good, _ := CredentialsFromUserPass("bob:right-password")
	c := &Client{Insecure: true, Credentials: good}
	dgst, err := c.Push(ctx, r, program(t), PushOptions{})
	if err != nil {
		t.Fatalf("right password: %v", err)
	}
	if got, err := c.Digest(ctx, r); err != nil || got != dgst {
		t.Fatalf("Digest with the right password: %s, %v", got, err)
	}

	bad, _ := CredentialsFromUserPass("bob:wrong-password")
	for name, cl := range map[string]*Client{"wrong": {Insecure: true, Credentials: bad}, "anonymous": {Insecure: true}} {
		_, err := cl.Digest(ctx, r)
		var ae *AuthError
		if !errors.As(err, &ae) || ae.Registry != reg.Host() || ae.Status != 401 {
			t.Fatalf("%s: err = %v, want a 401 *AuthError for %s", name, err, reg.Host())
		}
		if strings.Contains(err.Error(), "wrong-password") || strings.Contains(fmt.Sprintf("%+v", err), "wrong-password") {
			t.Errorf("%s: the error echoes the password: %v", name, err)
		}
		if ae.Anonymous != (name == "anonymous") {
			t.Errorf("%s: Anonymous = %v", name, ae.Anonymous)
		}
		if _, err := cl.Pull(ctx, r, filepath.Join(t.TempDir(), "out"), PullOptions{}); !errors.As(err, &ae) {
			t.Errorf("%s: Pull err = %v, want *AuthError", name, err)
		}
	}
}

func TestClientRefusesPlainHTTPUnlessInsecure(t *testing.T) {
	reg := testenv.NewRegistry(t)
	c := &Client{} // go-containerregistry would fall back to HTTP for 127.0.0.1
	_, err := c.Push(context.Background(), ref(reg, "demo/app:v1"), program(t), PushOptions{})
	if err == nil || !strings.Contains(err.Error(), "refusing plain HTTP") {
		t.Fatalf("err = %v, want a refusal of plain HTTP", err)
	}
	if reg.Requests() != 0 {
		t.Errorf("%d requests reached the registry", reg.Requests())
	}
}

func TestNotFound(t *testing.T) {
	reg := testenv.NewRegistry(t)
	c := newTestClient(reg)
	_, err := c.Digest(context.Background(), ref(reg, "demo/none:v1"))
	var nf *NotFoundError
	if !errors.As(err, &nf) || !strings.Contains(err.Error(), "demo/none:v1") {
		t.Fatalf("err = %v, want *NotFoundError naming the reference", err)
	}
}
