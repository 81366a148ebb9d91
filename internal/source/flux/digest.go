package flux

import (
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"hash"
	"regexp"
	"strings"

	"github.com/zeebo/blake3"
)

// newHash returns a hash for a digest in the form "<algorithm>:<hex>", for
// every algorithm source-controller writes (--artifact-digest-algo: sha256,
// the default, sha384, sha512 and blake3).
func newHash(digest string) (hash.Hash, string, error) {
	algo, hexPart, ok := strings.Cut(digest, ":")
	if !ok {
		return nil, "", fmt.Errorf("digest %q is not <algorithm>:<hex>", digest)
	}
	var h hash.Hash
	switch algo {
	case "sha256":
		h = sha256.New()
	case "sha384":
		h = sha512.New384()
	case "sha512":
		h = sha512.New()
	case "blake3":
		h = blake3.New()
	default:
		return nil, "", fmt.Errorf("digest %q uses %q, which is not one of sha256, sha384, sha512 or blake3", digest, algo)
	}
	if len(hexPart) != 2*h.Size() || !hexRE.MatchString(hexPart) {
		return nil, "", fmt.Errorf("digest %q: want %d lower-case hex digits after %q", digest, 2*h.Size(), algo+":")
	}
	return h, algo, nil
}

var hexRE = regexp.MustCompile(`^[0-9a-f]+$`)

func sum(algo string, h hash.Hash) string { return algo + ":" + hex.EncodeToString(h.Sum(nil)) }

// DigestError reports an artifact whose bytes do not match the digest its
// source published: nothing of it is kept.
type DigestError struct {
	URL       string
	Published string // the digest in .status.artifact
	Got       string // the digest of what was downloaded
}

func (e *DigestError) Error() string {
	return fmt.Sprintf("artifact %s has digest %s, but its source published %s: the download was altered or the source is inconsistent; nothing of it was extracted", e.URL, e.Got, e.Published)
}
