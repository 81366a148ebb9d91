package main

import (
	"bytes"
	"testing"
	"time"
)

func TestShorten(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"Applied revision main@sha1:abc", 60, "Applied revision main@sha1:abc"},
		{"line one\nline  two", 60, "line one line two"},
		{"the program failed: resource settings could not be created", 30, "the program failed..."},
		{"abcdefghijklmnopqrstuvwxyz", 10, "abcdefg..."},
	} {
		if got := shorten(tc.in, tc.n); got != tc.want {
			t.Errorf("shorten(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
		if n := len([]rune(shorten(tc.in, tc.n))); n > tc.n {
			t.Errorf("shorten(%q, %d) is %d long", tc.in, tc.n, n)
		}
	}
}

func TestShortRevision(t *testing.T) {
	for in, want := range map[string]string{
		"main@sha1:0123456789abcdef0123456789abcdef01234567": "main@sha1:0123456789ab",
		"v1.2.0@sha256:aaaabbbbccccddddeeeeffff00001111":     "v1.2.0@sha256:aaaabbbbcccc",
		"main@sha1:0ld": "main@sha1:0ld",
		"":              "",
	} {
		if got := shortRevision(in); got != want {
			t.Errorf("shortRevision(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestAge(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for d, want := range map[time.Duration]string{
		45 * time.Second: "45s", 5*time.Minute + 3*time.Second: "5m3s", 30 * time.Hour: "30h", 72 * time.Hour: "3d",
	} {
		if got := age(now.Add(-d), now); got != want {
			t.Errorf("age(-%s) = %q, want %q", d, got, want)
		}
	}
	if got := age(time.Time{}, now); got != "-" {
		t.Errorf("age(zero) = %q, want -", got)
	}
}

func TestTableDashesEmptyCells(t *testing.T) {
	var b bytes.Buffer
	tb := newTable(&b, "NAME", "VALUE")
	tb.row("a", "")
	tb.row("long-name", "x\ty")
	if err := tb.flush(); err != nil {
		t.Fatal(err)
	}
	want := "NAME        VALUE\na           -\nlong-name   x y\n"
	if b.String() != want {
		t.Errorf("got\n%q\nwant\n%q", b.String(), want)
	}
}
