package notify

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

func TestRefuseInternal(t *testing.T) {
	for addr, refused := range map[string]bool{
		"127.0.0.1:80": true, "127.8.9.1:443": true, "[::1]:80": true,
		"169.254.169.254:80": true, "[fe80::1]:80": true, "0.0.0.0:80": true, "[::]:80": true,
		"[::ffff:127.0.0.1]:80": true, "[::ffff:169.254.169.254]:80": true,
		"10.0.0.1:80": false, "192.168.1.1:80": false, "203.0.113.7:443": false, "[2001:db8::1]:443": false,
		"not-an-address": true,
	} {
		err := refuseInternal("tcp", addr, nil)
		if (err != nil) != refused {
			t.Errorf("%s: refused = %v, want %v", addr, err != nil, refused)
		}
	}
}

// send follows no redirect, whatever the client default would do.
func TestSendFollowsNoRedirect(t *testing.T) {
	var reached atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached.Add(1) }))
	defer target.Close()
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL, code)
		}))
		n := &Notifier{HTTP: NewHTTPClient(false)}
		err := n.send(context.Background(), &Request{Method: http.MethodPost, URL: redirector.URL, Header: http.Header{}})
		redirector.Close()
		if _, ok := err.(*permanentError); !ok || !strings.Contains(err.Error(), "a redirect, which is not followed") {
			t.Errorf("%d: %v", code, err)
		}
	}
	if reached.Load() != 0 {
		t.Fatalf("the redirect's target got %d requests", reached.Load())
	}
}

func TestSendErrorsAreClasses(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	n := &Notifier{HTTP: NewHTTPClient(false)}
	err = n.send(context.Background(), &Request{Method: http.MethodPost, URL: "http://" + closed + "/x", Header: http.Header{}})
	if err == nil || err.Error() != "could not connect: check spec.provider.address" {
		t.Errorf("closed port: %v", err)
	}
	sink := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer sink.Close()
	n = &Notifier{HTTP: NewHTTPClient(true)}
	err = n.send(context.Background(), &Request{Method: http.MethodPost, URL: sink.URL, Header: http.Header{}})
	if _, ok := err.(*permanentError); !ok || err.Error() != errInternalAddress.Error() {
		t.Errorf("loopback with denyInternal: %v", err)
	}
}
