package runner

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// doneEvent is the event of a finished step: only those count (a step
// started, or failed, has changed nothing yet).
func doneEvent(op, name string) string {
	return `{"sequence":1,"timestamp":1,"resOutputsEvent":{"metadata":{"op":"` + op +
		`","urn":"urn:pulumi:dev::p::kubernetes:core/v1:ConfigMap::` + name + `","type":"kubernetes:core/v1:ConfigMap"}}}`
}

// The progress file follows the event log as the CLI writes it, a line
// only once it is complete.
func TestProgressFollowsTheEventLog(t *testing.T) {
	g := NewWithT(t)
	progressInterval = 20 * time.Millisecond
	dir := t.TempDir()
	logPath := filepath.Join(dir, "events.jsonl")
	progPath := filepath.Join(dir, "progress.json")
	f, err := os.Create(logPath)
	g.Expect(err).NotTo(HaveOccurred())
	defer f.Close()

	c := newEventCollector(false)
	tail := &logTail{path: logPath}
	p := startProgress("up-1", progPath, tail, c)

	_, _ = f.WriteString(doneEvent("create", "a") + "\n" + doneEvent("update", "b") + "\n")
	g.Eventually(func() ChangeCounts {
		pr, _ := ReadProgress(progPath)
		if pr == nil {
			return ChangeCounts{}
		}
		return pr.Changes
	}, 30*time.Second, 50*time.Millisecond).Should(Equal(ChangeCounts{Create: 1, Update: 1}))

	// Half a line is not read until its newline comes.
	line := doneEvent("create", "c")
	_, _ = f.WriteString(line[:20])
	time.Sleep(100 * time.Millisecond)
	pr, err := ReadProgress(progPath)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pr.ID).To(Equal("up-1"))
	g.Expect(pr.Changes).To(Equal(ChangeCounts{Create: 1, Update: 1}))
	_, _ = f.WriteString(line[20:] + "\n" + doneEvent("delete", "d"))

	p.finish() // the last line, without its newline, counts too
	pr, _ = ReadProgress(progPath)
	g.Expect(pr.Changes).To(Equal(ChangeCounts{Create: 2, Update: 1, Delete: 1}))
	g.Expect(c.counts()).To(Equal(pr.Changes))
}

// Without a progress file nothing is written, and the log is read once at
// the end as before.
func TestProgressWithoutFile(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	logPath := filepath.Join(dir, "events.jsonl")
	g.Expect(os.WriteFile(logPath, []byte(doneEvent("create", "a")+"\n"), 0o600)).To(Succeed())
	c := newEventCollector(false)
	startProgress("up-1", "", &logTail{path: logPath}, c).finish()
	g.Expect(c.counts()).To(Equal(ChangeCounts{Create: 1}))
	entries, _ := os.ReadDir(dir)
	g.Expect(entries).To(HaveLen(1))
}

func TestReadProgressMissing(t *testing.T) {
	g := NewWithT(t)
	p, err := ReadProgress(filepath.Join(t.TempDir(), "none"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p).To(BeNil())
}
