package oci

import (
	"strings"
	"testing"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{in: "oci://ghcr.io/org/app", want: "ghcr.io/org/app"},
		{in: "oci://127.0.0.1:5000/app", want: "127.0.0.1:5000/app"},
		{in: "ghcr.io/org/app", err: `must start with "oci://"`},
		{in: "https://ghcr.io/org/app", err: `must start with "oci://"`},
		{in: "oci://ghcr.io/org/app:v1", err: "without a tag or digest"},
		{in: "oci://ghcr.io", err: "needs a registry host and a repository path"},
		{in: "oci://ghcr.io/Org/App", err: "bad repository"},
	} {
		got, err := ParseURL(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseURL(%q) error = %v, want it to contain %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseURL(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestParseReference(t *testing.T) {
	const dg = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		in   string
		want Reference
		err  string
	}{
		{in: "oci://ghcr.io/org/app:v1.2.3", want: Reference{Repository: "ghcr.io/org/app", Tag: "v1.2.3"}},
		{in: "oci://127.0.0.1:5000/app:latest", want: Reference{Repository: "127.0.0.1:5000/app", Tag: "latest"}},
		{in: "oci://127.0.0.1:5000/app@" + dg, want: Reference{Repository: "127.0.0.1:5000/app", Digest: dg}},
		{in: "ghcr.io/org/app:v1", err: `must start with "oci://"`},
		{in: "oci://ghcr.io/org/app:v1@" + dg, err: "a tag or a digest, not both"},
		{in: "oci://ghcr.io/org/app@sha256:abc", err: "bad digest"},
		{in: "oci://ghcr.io/org/app@md5:0123", err: "bad digest"},
		{in: "oci://ghcr.io/org/app", err: "add a tag"},
		{in: "oci://127.0.0.1:5000/app", err: "add a tag"},
		{in: "oci://ghcr.io/org/app:bad/tag", err: "add a tag"},
		{in: "oci://ghcr.io/org/app:-x", err: "bad tag"},
	} {
		got, err := ParseReference(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseReference(%q) error = %v, want it to contain %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseReference(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
		if s := "oci://" + got.String(); s != tc.in {
			t.Errorf("String() = %q, want %q", got.String(), strings.TrimPrefix(tc.in, "oci://"))
		}
	}
}
