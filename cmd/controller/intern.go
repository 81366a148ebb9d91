package main

import "sync"

// interner hands out one shared copy of equal strings, so that values many
// cached objects repeat are held once. It remembers at most about 2×size
// strings: when the current generation is full it becomes the previous one
// and the one before is dropped, so strings no object repeats any more
// (an old revision, a one-off error message) are forgotten instead of held
// for the life of the process; a string used again is moved to the current
// generation. A forgotten string stays alive as long as the objects holding
// it; only its later copies are not shared with them.
//
// (The standard library's unique.Make shares a string only while a Handle
// to it lives: a cached object keeps the string, not the Handle, so after
// the next garbage collection equal strings got copies of their own again.)
type interner struct {
	mu             sync.Mutex
	size           int
	current, older map[string]string
}

func newInterner(size int) *interner {
	return &interner{size: size, current: make(map[string]string, size)}
}

// intern returns the shared copy of s ("" as it is).
func (in *interner) intern(s string) string {
	if s == "" {
		return s
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if v, ok := in.current[s]; ok {
		return v
	}
	v, ok := in.older[s]
	if !ok {
		v = s
	}
	if len(in.current) >= in.size {
		in.older, in.current = in.current, make(map[string]string, in.size)
	}
	in.current[v] = v
	return v
}
