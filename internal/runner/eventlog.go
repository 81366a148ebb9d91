package runner

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/pulumi/pulumi/sdk/v3/go/auto/events"
	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
)

// maskedSecret is how the CLI's event log shows a secret value: it writes
// events without secrets (backend/display: ConvertEngineEvent, showSecrets false).
const maskedSecret = "[secret]"

// eventLog is the file the CLI writes its engine events to (`--event-log`),
// one JSON object a line. The runner reads it once the CLI has ended: nothing
// needs the events while the operation runs, and a file read after the fact
// cannot lose the last events to a race with the process's exit.
type eventLog struct {
	dir string
}

func newEventLog() (*eventLog, error) {
	dir, err := os.MkdirTemp("", "stackpilot-events-")
	if err != nil {
		return nil, err
	}
	return &eventLog{dir: dir}, nil
}

func (l *eventLog) path() string { return filepath.Join(l.dir, "events.jsonl") }

func (l *eventLog) remove() { _ = os.RemoveAll(l.dir) }

// logTail reads the event log incrementally: while the CLI runs (the live
// progress) and once more after it ended, each complete line once. A line
// the CLI is still writing waits for its newline.
type logTail struct {
	path    string
	mu      sync.Mutex
	off     int64
	partial []byte
	outputs map[string]any
}

func (l *eventLog) tail() *logTail { return &logTail{path: l.path()} }

// read hands every new complete event line to c.
func (t *logTail) read(c *eventCollector) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f, err := os.Open(t.path)
	if err != nil {
		return // the CLI has not opened the log (yet)
	}
	defer func() { _ = f.Close() }()
	if _, err := f.Seek(t.off, io.SeekStart); err != nil {
		return
	}
	r := bufio.NewReaderSize(f, 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		t.off += int64(len(line))
		if err != nil {
			// No newline yet: keep the start of the line for the next read.
			t.partial = append(t.partial, line...)
			return
		}
		if len(t.partial) > 0 {
			line = append(t.partial, line...)
			t.partial = nil
		}
		t.handle(c, line)
	}
}

// rest handles a last line without its newline, once the CLI has ended.
func (t *logTail) rest(c *eventCollector) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.partial) > 0 {
		t.handle(c, t.partial)
		t.partial = nil
	}
}

func (t *logTail) handle(c *eventCollector, line []byte) {
	if line = bytes.TrimSpace(line); len(line) == 0 {
		return
	}
	var e apitype.EngineEvent
	if json.Unmarshal(line, &e) == nil {
		c.handle(events.EngineEvent{EngineEvent: e})
		if o := e.ResOutputsEvent; o != nil && o.Metadata.Type == rootStackType && o.Metadata.New != nil {
			t.outputs = o.Metadata.New.Outputs
		}
	}
}

// maskedOutputs turns the event log's outputs into a Result's. A value that
// is, or holds, the mask is a secret the log did not show: ok is false, and
// the caller reads the outputs from the state instead.
func maskedOutputs(m map[string]any) (out map[string]Output, ok bool) {
	if len(m) == 0 {
		return nil, true
	}
	out = make(map[string]Output, len(m))
	for k, v := range m {
		if holdsMask(v) {
			return nil, false
		}
		out[k] = Output{Value: v}
	}
	return out, true
}

func holdsMask(v any) bool {
	switch t := v.(type) {
	case string:
		return t == maskedSecret
	case map[string]any:
		for _, e := range t {
			if holdsMask(e) {
				return true
			}
		}
	case []any:
		for _, e := range t {
			if holdsMask(e) {
				return true
			}
		}
	}
	return false
}
