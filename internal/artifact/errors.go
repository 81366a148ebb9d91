package artifact

import "fmt"

// UnsafePathError reports a path that would reach outside the tree it
// belongs to (through "..", an absolute path or a symbolic link), or an entry
// of a kind we never materialise (devices, FIFOs). Such content is refused
// rather than silently dropped: the user has to change the source.
type UnsafePathError struct {
	// Path is the offending path, relative to the tree or archive.
	Path string
	// Reason says what is wrong with it.
	Reason string
}

func (e *UnsafePathError) Error() string {
	return fmt.Sprintf("unsafe path %q: %s", e.Path, e.Reason)
}

// LimitError reports an archive, or a tree being copied, larger than the
// limits allow.
type LimitError struct {
	Limit string // "size", "file count" or "header size"
	Max   int64
	Of    string // what exceeded it: "archive" when empty, or "tree"
}

func (e *LimitError) Error() string {
	of := e.Of
	if of == "" {
		of = "archive"
	}
	return fmt.Sprintf("%s exceeds the %s limit of %d", of, e.Limit, e.Max)
}
