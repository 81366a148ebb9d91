package runner

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func TestEngineLogScrubsSecretsAndANSI(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "logs", "op.log")
	spec := Spec{
		LogFile: path,
		Env:     map[string]string{"PULUMI_CONFIG_PASSPHRASE": "pass-phrase-123", "KEY": "-----BEGIN KEY-----\nAAAABBBBCCCC\n-----END KEY-----"},
		Config:  []ConfigValue{{Key: "token", Value: "tok-987654", Secret: true}, {Key: "plain", Value: "visible-value"}},
	}
	l, err := openEngineLog(spec)
	g.Expect(err).NotTo(HaveOccurred())
	// A secret split across two writes is still one line, and scrubbed.
	_, _ = l.stdout().Write([]byte("Updating (dev):\n \x1b[32m+\x1b[0m  cm  created tok-98"))
	_, _ = l.stdout().Write([]byte("7654 \x1b]8;;http://x\x07link\x1b]8;;\x07\r\n"))
	_, _ = l.stderrTee(nil).Write([]byte("error: passphrase pass-phrase-123 refused; key AAAABBBBCCCC\n"))
	_, _ = l.stdout().Write([]byte("plain visible-value, no newline at the end"))
	l.close()

	b, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	got := string(b)
	g.Expect(got).To(ContainSubstring("Updating (dev):\n +  cm  created [secret] link\n"))
	g.Expect(got).To(ContainSubstring("error: passphrase [secret] refused; key [secret]\n"))
	g.Expect(got).To(HaveSuffix("plain visible-value, no newline at the end\n"))
	for _, secret := range []string{"tok-987654", "pass-phrase-123", "AAAABBBBCCCC", "\x1b", "\r"} {
		g.Expect(got).NotTo(ContainSubstring(secret))
	}
}

func TestEngineLogKeepsHeadAndTail(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "op.log")
	l, err := openEngineLog(Spec{LogFile: path})
	g.Expect(err).NotTo(HaveOccurred())
	line := strings.Repeat("x", 99) + "\n" // 100 bytes
	n := (LogHeadBytes + LogTailBytes + 100_000) / 100
	for i := range n {
		_, _ = fmt.Fprintf(l.stdout(), "%08d%s", i, line[8:])
	}
	_, _ = l.stdout().Write([]byte("Resources:\n    3 created\n"))
	l.close()

	b, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	got := string(b)
	g.Expect(len(got)).To(BeNumerically("<", 1<<20))
	g.Expect(got).To(HavePrefix("00000000x"))
	g.Expect(got).To(HaveSuffix("Resources:\n    3 created\n"))
	g.Expect(got).To(MatchRegexp(`\n… \d+ bytes omitted …\n\d{8}x`))
	// What is kept plus what is said omitted is everything written.
	var omitted int
	_, _ = fmt.Sscanf(got[strings.Index(got, "… ")+len("… "):], "%d", &omitted)
	marker := fmt.Sprintf("… %d bytes omitted …\n", omitted)
	g.Expect(len(got) - len(marker) + omitted).To(Equal(n*100 + len("Resources:\n    3 created\n")))
}

func TestEngineLogNoneWithoutLogFile(t *testing.T) {
	g := NewWithT(t)
	l, err := openEngineLog(Spec{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(l.stdout()).To(BeNil())
	var buf strings.Builder
	g.Expect(l.stderrTee(&buf)).To(BeIdenticalTo(&buf))
	l.close()
}
