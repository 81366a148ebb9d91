package main

import (
	"fmt"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/stackpilot/stackpilot/internal/gitserver"
)

// gitServer serves bare repositories under root over smart HTTP on
// 127.0.0.1 (internal/gitserver), so the demo's Git is real Git: it can be
// cloned and pushed to. Each request is logged to a file, not the terminal.
type gitServer struct {
	*gitserver.Server
	log *os.File
}

func startGitServer(root, logPath string) (*gitServer, error) {
	srv, err := gitserver.New(root)
	if err != nil {
		return nil, err
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	s := &gitServer{Server: srv, log: logFile}
	if err := srv.Start(logRequests(log.New(logFile, "", log.LstdFlags), srv)); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("git server: %w", err)
	}
	return s, nil
}

// URL is the clone address of repo.
func (s *gitServer) URL(repo string) string { return s.RepoURL(repo) }

func (s *gitServer) Stop() {
	_ = s.Close()
	s.log.Close()
}

// logRequests logs each request with its status and duration.
func logRequests(l *log.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t0 := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r)
		l.Printf("%s %s %d %s", r.Method, r.URL.RequestURI(), sw.status, time.Since(t0).Round(time.Millisecond))
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}
