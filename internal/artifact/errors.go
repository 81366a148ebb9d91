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

// LimitError reports an archive larger than the limits allow.
type LimitError struct {
	Limit string // "size" or "file count"
	Max   int64
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("archive exceeds the %s limit of %d", e.Limit, e.Max)
}
