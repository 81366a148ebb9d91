package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// TestEngineLogScrubsASecretSplitByALongLineCut: a line longer than
// maxLineBytes is written in pieces; a secret across the cut is still
// replaced, wherever the cut falls, and the text around it is all kept.
func TestEngineLogScrubsASecretSplitByALongLineCut(t *testing.T) {
	const secret = "tok-0123456789abcdef"
	g := NewWithT(t)
	// Every position around the first cuts, whatever size they are made at.
	for at := maxLineBytes - 2*len(secret); at < 2*maxLineBytes; at += 11 {
		path := filepath.Join(t.TempDir(), "op.log")
		l, err := openEngineLog(Spec{LogFile: path, Env: map[string]string{"TOKEN": secret}})
		g.Expect(err).NotTo(HaveOccurred())
		line := strings.Repeat("a", at) + secret + strings.Repeat("b", maxLineBytes) + "\n"
		// Written in chunks, as a pipe delivers it.
		for i := 0; i < len(line); i += 4096 {
			_, _ = l.stdout().Write([]byte(line[i:min(i+4096, len(line))]))
		}
		l.close()
		b, err := os.ReadFile(path)
		g.Expect(err).NotTo(HaveOccurred())
		got := string(b)
		g.Expect(got).NotTo(ContainSubstring(secret[:len(secret)/2]), "secret at %d", at)
		g.Expect(got).NotTo(ContainSubstring(secret[len(secret)/2:]), "secret at %d", at)
		g.Expect(strings.ReplaceAll(got, "\n", "")).To(Equal(strings.Repeat("a", at)+Redacted+strings.Repeat("b", maxLineBytes)), "secret at %d", at)
	}
}
