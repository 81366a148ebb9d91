package testenv

import (
	"fmt"
	"os"
	"slices"
	"sync"
)

// TB is the part of testing.TB that the helpers of this package use, so that
// programs (the demo, the benchmarks) can use them too: *testing.T satisfies it,
// and Program is an implementation for a main package.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(func())
	TempDir() string
}

// Program is a TB for programs: Fatalf panics with a *FatalError (recover it
// in main after Close), and Close runs the cleanups, newest first.
type Program struct {
	mu       sync.Mutex
	cleanups []func()
}

// FatalError is what Program.Fatalf panics with.
type FatalError struct{ Msg string }

func (e *FatalError) Error() string { return e.Msg }

func (p *Program) Helper() {}

func (p *Program) Fatalf(format string, args ...any) {
	panic(&FatalError{Msg: fmt.Sprintf(format, args...)})
}

func (p *Program) Cleanup(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cleanups = append(p.cleanups, f)
}

func (p *Program) TempDir() string {
	dir, err := os.MkdirTemp("", "stackpilot-")
	if err != nil {
		p.Fatalf("temp dir: %v", err)
	}
	p.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// Close runs the cleanups, newest first.
func (p *Program) Close() {
	p.mu.Lock()
	fns := slices.Clone(p.cleanups)
	p.cleanups = nil
	p.mu.Unlock()
	for _, f := range slices.Backward(fns) {
		f()
	}
}
