package runner

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"

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

// replay hands every event to c and returns the root stack's outputs as the
// last outputs event of the stack resource showed them (secrets masked), or nil
// when there was none.
func (l *eventLog) replay(c *eventCollector) map[string]any {
	f, err := os.Open(l.path())
	if err != nil {
		return nil // the CLI failed before it opened the log
	}
	defer func() { _ = f.Close() }()
	var outputs map[string]any
	r := bufio.NewReaderSize(f, 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		if line = bytes.TrimSpace(line); len(line) > 0 {
			var e apitype.EngineEvent
			if json.Unmarshal(line, &e) == nil {
				c.handle(events.EngineEvent{EngineEvent: e})
				if o := e.ResOutputsEvent; o != nil && o.Metadata.Type == rootStackType && o.Metadata.New != nil {
					outputs = o.Metadata.New.Outputs
				}
			}
		}
		if errors.Is(err, io.EOF) || err != nil {
			return outputs
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
