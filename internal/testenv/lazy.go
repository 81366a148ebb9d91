package testenv

import (
	"sync"
	"testing"
)

// Lazy is one control plane shared by the tests of a package that need one,
// started by the first of them (Get): the package's other tests then run
// without an API server, and a run of those alone starts none. Stop it from
// the package's TestMain.
type Lazy struct {
	// Options start the control plane.
	Options Options

	once sync.Once
	env  *Env
	err  error
}

// Get is the control plane, started at the first call; a start that failed
// fails every test that asks.
func (l *Lazy) Get(t testing.TB) *Env {
	t.Helper()
	l.once.Do(func() { l.env, l.err = Start(l.Options) })
	if l.err != nil {
		t.Fatal(l.err)
	}
	return l.env
}

// Stop stops the control plane if a test started it.
func (l *Lazy) Stop() {
	if l.env != nil {
		_ = l.env.Stop()
	}
}
