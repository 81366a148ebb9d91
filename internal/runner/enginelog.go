package runner

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"
)

// The engine log (Spec.LogFile) is bounded where it is written: its first
// LogHeadBytes as they come, so that a follower sees a run live, then only
// the last LogTailBytes, kept in memory and written when the run ends after
// a "… N bytes omitted …" line. Pulumi prints its summary and its errors
// last, so both ends matter. Together they stay under the controller's
// per-operation bound (1 MiB), so the controller never has to cut a log.
const (
	LogHeadBytes = 448 << 10
	LogTailBytes = 448 << 10
	// maxLineBytes cuts a line that never ends (a program printing a blob)
	// so the partial line buffered per stream stays small.
	maxLineBytes = 16 << 10
)

// escapePattern matches the escape sequences a terminal interprets: CSI
// (colours, cursor moves), OSC (titles, links) and the two-byte ones. Pulumi
// runs with --color never, but a program or a provider may print its own.
var escapePattern = regexp.MustCompile(`\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]`)

// StripANSI removes terminal escape sequences, Pulumi's colour markup
// (<{%reset%}>) and carriage returns from s.
func StripANSI(s string) string {
	s = cleanText(escapePattern.ReplaceAllString(s, ""))
	return strings.ReplaceAll(s, "\r", "")
}

// engineLog writes the human output of one engine run to Spec.LogFile,
// line by line: a secret value is matched within a line, never across a
// write boundary, nor across the cut of a line too long to buffer whole. Its zero value (nil) writes nothing.
type engineLog struct {
	mu    sync.Mutex
	f     *os.File
	scrub *scrubber
	head  int         // bytes the head may still take
	tail  *tailBuffer // the lines after the head, last LogTailBytes of them
	// tailBytes counts every byte that went to the tail.
	tailBytes int64
	out, err  *lineWriter
}

// openEngineLog creates spec.LogFile; nil when the spec asks for none.
func openEngineLog(spec Spec) (*engineLog, error) {
	if spec.LogFile == "" {
		return nil, nil
	}
	if err := os.MkdirAll(filepath.Dir(spec.LogFile), 0o700); err != nil {
		return nil, fmt.Errorf("engine log: %w", err)
	}
	f, err := os.OpenFile(spec.LogFile, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("engine log: %w", err)
	}
	l := &engineLog{f: f, scrub: newScrubber(lineSecrets(spec)), head: LogHeadBytes, tail: &tailBuffer{max: LogTailBytes}}
	l.out, l.err = &lineWriter{log: l}, &lineWriter{log: l}
	return l, nil
}

// lineSecrets is spec with each line of a multi-line secret (a PEM key, a
// kubeconfig) added as a secret of its own: the log is scrubbed per line.
func lineSecrets(spec Spec) Spec {
	env := maps.Clone(spec.Env)
	if env == nil {
		env = map[string]string{}
	}
	values := secretValues(spec)
	n := 0
	for _, v := range values {
		if !strings.Contains(v, "\n") {
			continue
		}
		for _, line := range strings.Split(v, "\n") {
			if line = strings.TrimSpace(line); len(line) >= shortSecret {
				env[fmt.Sprintf("\x00line%d", n)] = line
				n++
			}
		}
	}
	spec.Env = env
	return spec
}

// stdout is the writer for the CLI's stdout; nil when there is no log.
func (l *engineLog) stdout() io.Writer {
	if l == nil {
		return nil
	}
	return l.out
}

// stderrTee is w, and the log too when there is one: the CLI prints its
// diagnostics and errors on stderr.
func (l *engineLog) stderrTee(w io.Writer) io.Writer {
	switch {
	case l == nil:
		return w
	case w == nil:
		return l.err
	}
	return io.MultiWriter(w, l.err)
}

// line writes one line (with its newline), cleaned.
func (l *engineLog) line(b []byte) {
	l.write(l.clean(b))
}

// clean is b without terminal codes and secrets.
func (l *engineLog) clean(b []byte) string {
	return l.scrub.scrub(StripANSI(string(b)))
}

// write appends cleaned text to the head, or to the tail once the head is full.
func (l *engineLog) write(text string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tailBytes == 0 && len(text) <= l.head {
		l.head -= len(text)
		_, _ = l.f.WriteString(text)
		return
	}
	l.head = 0 // in order: nothing after the first line that did not fit
	l.tailBytes += int64(len(text))
	_, _ = l.tail.Write([]byte(text))
}

// close writes the partial last lines and the tail, and closes the file.
func (l *engineLog) close() {
	if l == nil {
		return
	}
	l.out.flush()
	l.err.flush()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tailBytes > 0 {
		kept := l.tail.String()
		if omitted := l.tailBytes - int64(len(kept)); omitted > 0 {
			fmt.Fprintf(l.f, "… %d bytes omitted …\n", omitted)
		}
		_, _ = l.f.WriteString(kept)
	}
	_ = l.f.Close()
}

// lineWriter cuts one stream into lines for its engineLog: stdout and
// stderr each have one, so their lines never mix mid-line.
type lineWriter struct {
	log *engineLog
	buf []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.log.line(w.buf[:i+1])
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) > maxLineBytes {
		w.cut()
	}
	if len(w.buf) == 0 {
		w.buf = nil // let a long-gone burst's array go
	}
	return len(p), nil
}

// cut writes the start of a line that grew past maxLineBytes and keeps its
// end buffered: as long as the longest secret (and the character before it,
// which a short secret's word match looks at), so that a secret the cut
// would split is matched whole with what follows. The buffer holds cleaned
// text from then on; cleaning it again changes nothing.
func (w *lineWriter) cut() {
	text := w.log.clean(w.buf)
	keep := w.log.scrub.longest() + 1
	at := len(text) - keep
	for at > 0 && !utf8.RuneStart(text[at]) {
		at-- // never split a character
	}
	if at <= 0 {
		w.buf = []byte(text)
		return
	}
	w.log.write(text[:at])
	w.buf = append(w.buf[:0], text[at:]...)
}

// flush writes what is buffered as a line of its own.
func (w *lineWriter) flush() {
	if len(w.buf) == 0 {
		return
	}
	w.log.line(append(w.buf, '\n'))
	w.buf = nil
}
