package runner

import (
	"encoding/json"
	"os"
	"sync"
	"time"

	"github.com/stackpilot/stackpilot/internal/atomicfile"
)

// progressInterval bounds how often the progress file is replaced: the
// controller reads it every few seconds, a faster write would buy nothing.
var progressInterval = time.Second

// Progress is what Spec.ProgressFile holds while an operation runs: the change
// counts of the steps the engine has finished so far (a step started, or
// failed, is not a change made).
type Progress struct {
	ID        string       `json:"id"`
	Changes   ChangeCounts `json:"changes"`
	UpdatedAt time.Time    `json:"updatedAt"`
}

// ReadProgress reads a progress file; a missing one is (nil, nil).
func ReadProgress(path string) (*Progress, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var p Progress
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// progressReporter tails the CLI's event log while the engine runs, feeds the
// collector and writes its counts to the progress file, atomically (a temp
// file renamed over it: a reader never sees half a file) and only when they
// changed.
type progressReporter struct {
	id   string
	path string
	log  *logTail
	c    *eventCollector

	last    *ChangeCounts
	stop    chan struct{}
	done    chan struct{}
	stopped sync.Once
}

// startProgress tails log into c until the returned reporter is stopped; with
// no path it only returns a reporter whose stop reads the log to its end.
func startProgress(id, path string, log *logTail, c *eventCollector) *progressReporter {
	p := &progressReporter{id: id, path: path, log: log, c: c, stop: make(chan struct{}), done: make(chan struct{})}
	if path == "" {
		close(p.done)
		return p
	}
	go func() {
		defer close(p.done)
		t := time.NewTicker(progressInterval)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.log.read(p.c)
				p.write()
			}
		}
	}()
	return p
}

// finish stops the ticker, reads the rest of the log (the CLI has ended, so
// nothing is lost to a race with its exit) and writes the last counts.
func (p *progressReporter) finish() {
	p.stopped.Do(func() { close(p.stop) })
	<-p.done
	p.log.read(p.c)
	p.log.rest(p.c)
	if p.path != "" {
		p.write()
	}
}

func (p *progressReporter) write() {
	cc := p.c.counts()
	if p.last != nil && *p.last == cc {
		return
	}
	b, err := json.Marshal(Progress{ID: p.id, Changes: cc, UpdatedAt: time.Now().UTC()})
	if err != nil {
		return
	}
	// Progress is best effort: a failed write must not fail the operation.
	if atomicfile.Write(p.path, b, 0o600) == nil {
		p.last = &cc
	}
}
