package main

import (
	"fmt"
	"strings"
	"testing"
	"unsafe"
)

// Equal strings come back as one copy; what is not used again for two
// generations is forgotten, and what is used again stays shared.
func TestInternerSharesAndForgets(t *testing.T) {
	in := newInterner(4)
	// Strings built at run time, so that no two share memory to begin with.
	fresh := func(s string) string { return strings.Clone(s) }
	same := func(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

	first := in.intern(fresh("main@sha1:0123"))
	if again := in.intern(fresh("main@sha1:0123")); again != first || !same(again, first) {
		t.Fatal("an equal string was not given the shared copy")
	}
	if in.intern("") != "" {
		t.Fatal(`"" changed`)
	}

	// Fill two generations with others, using first again in between: it
	// stays shared; "old" is forgotten.
	old := in.intern(fresh("old"))
	for i := range 6 {
		in.intern(fmt.Sprint("other-", i))
		if i == 2 {
			if got := in.intern(fresh("main@sha1:0123")); !same(got, first) {
				t.Fatal("a string used again lost its shared copy")
			}
		}
	}
	if got := in.intern(fresh("old")); same(got, old) {
		t.Error("a string unused for two generations is still held")
	}
	if n := len(in.current) + len(in.older); n > 2*in.size {
		t.Errorf("the interner holds %d strings, more than 2×%d", n, in.size)
	}
}
