package receiver

import (
	"sync"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// Target is what the server needs of one Receiver, kept by the Receiver
// reconciler. Token stays in memory; it is never logged or written out.
type Target struct {
	Key      types.NamespacedName
	Type     string
	Events   []string
	Selector labels.Selector // nil: every Stack of the namespace
	Suspend  bool
	Token    []byte
	// AcceptUnsigned is spec.acceptUnsigned (oci only): act on a request
	// without a signature.
	AcceptUnsigned bool
}

// Index maps webhook paths to the Receivers that serve them. It is safe for
// concurrent use.
type Index struct {
	mu     sync.RWMutex
	byPath map[string]*Target
	pathOf map[types.NamespacedName]string
}

// NewIndex returns an empty Index.
func NewIndex() *Index {
	return &Index{byPath: map[string]*Target{}, pathOf: map[types.NamespacedName]string{}}
}

// Set serves t on path, replacing what the same Receiver served before.
func (x *Index) Set(path string, t *Target) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if old, ok := x.pathOf[t.Key]; ok && old != path {
		delete(x.byPath, old)
	}
	x.byPath[path] = t
	x.pathOf[t.Key] = path
}

// Delete stops serving the Receiver key.
func (x *Index) Delete(key types.NamespacedName) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if old, ok := x.pathOf[key]; ok {
		delete(x.byPath, old)
		delete(x.pathOf, key)
	}
}

// Lookup returns the Receiver serving path.
func (x *Index) Lookup(path string) (*Target, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	t, ok := x.byPath[path]
	return t, ok
}
