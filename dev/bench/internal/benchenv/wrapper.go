package benchenv

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Wrapper is dev/bench/internal/pulumiwrap installed as <Dir>/bin/pulumi in front
// of the real bin/pulumi: every pulumi process started through it is one line
// of <Dir>/calls.log. The benchmarks count and time Pulumi from that log, not
// from anything the runner or the controller reports.
type Wrapper struct {
	Dir string
}

// Pulumi is the wrapper's path, <Dir>/bin/pulumi: what --pulumi and
// Spec.PulumiCommand take.
func (w *Wrapper) Pulumi() string { return filepath.Join(w.Dir, "bin", "pulumi") }

// BinDir is <Dir>/bin, to put first on a PATH.
func (w *Wrapper) BinDir() string { return filepath.Join(w.Dir, "bin") }

// NewWrapper builds the wrapper once per run (into <Tmp>/pulumiwrap) and
// installs a copy at <Tmp>/<name>/bin/pulumi, logging to
// <Tmp>/<name>/calls.log; each side of a benchmark gets its own.
func (e *Env) NewWrapper(ctx context.Context, name string) (*Wrapper, error) {
	built := filepath.Join(e.Tmp, "pulumiwrap")
	if _, err := os.Stat(built); err != nil {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", built, "./bench/internal/pulumiwrap")
		// It is a package of the dev module, which lives in dev/.
		cmd.Dir = filepath.Join(e.Root, "dev")
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go build ./dev/bench/internal/pulumiwrap: %v\n%s", err, out)
		}
	}
	w := &Wrapper{Dir: filepath.Join(e.Tmp, name)}
	if err := os.MkdirAll(w.BinDir(), 0o755); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(built)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(w.Pulumi(), data, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(w.Dir, "real"), []byte(filepath.Join(e.Bin, "pulumi")+"\n"), 0o644); err != nil {
		return nil, err
	}
	return w, nil
}

// Call is one pulumi process, as the wrapper logged it when it ended.
type Call struct {
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
	Args    []string  `json:"args"`    // argv[1..2]
	Cmd     string    `json:"command"` // the subcommand: "up", "stack select"
	Exit    int       `json:"exit"`
	Pid     int       `json:"pid"`
	Ppid    int       `json:"ppid"`
	UserCPU float64   `json:"userCPU"` // seconds, the CLI's process tree
	SysCPU  float64   `json:"sysCPU"`
}

// Duration is the process's wall time.
func (c Call) Duration() time.Duration { return c.End.Sub(c.Start) }

// CPU is user+system CPU of the process tree.
func (c Call) CPU() time.Duration {
	return time.Duration((c.UserCPU + c.SysCPU) * float64(time.Second))
}

// Command is the subcommand the process ran ("up", "stack select"), as the
// wrapper read it from its arguments: flags skipped, no values.
func (c Call) Command() string {
	if c.Cmd == "" {
		return "(none)"
	}
	return c.Cmd
}

// Calls reads every call logged so far (none when the log does not exist yet).
func (w *Wrapper) Calls() ([]Call, error) {
	f, err := os.Open(filepath.Join(w.Dir, "calls.log"))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Call
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var c Call
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			return nil, fmt.Errorf("%s: %w", f.Name(), err)
		}
		out = append(out, c)
	}
	return out, sc.Err()
}

// CallsFrom returns the calls after the first n (a count taken earlier with
// len(Calls())).
func (w *Wrapper) CallsFrom(n int) ([]Call, error) {
	all, err := w.Calls()
	if err != nil || n >= len(all) {
		return nil, err
	}
	return all[n:], nil
}

// Count is how many calls are logged so far.
func (w *Wrapper) Count() (int, error) {
	all, err := w.Calls()
	return len(all), err
}

// WallInside is the wall time during which at least one of calls was running:
// the union of their intervals, so that overlapping processes count once.
func WallInside(calls []Call) time.Duration {
	s := append([]Call(nil), calls...)
	sort.Slice(s, func(i, j int) bool { return s[i].Start.Before(s[j].Start) })
	var total time.Duration
	var cur Call
	for i, c := range s {
		switch {
		case i == 0:
			cur = c
		case !c.Start.After(cur.End):
			if c.End.After(cur.End) {
				cur.End = c.End
			}
		default:
			total += cur.Duration()
			cur = c
		}
	}
	if len(s) > 0 {
		total += cur.Duration()
	}
	return total
}

// Commands lists the calls' Command in start order, "up" for one call,
// "stack select, up, stack output ×2" for several.
func Commands(calls []Call) string {
	s := append([]Call(nil), calls...)
	sort.Slice(s, func(i, j int) bool { return s[i].Start.Before(s[j].Start) })
	var parts []string
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && s[j].Command() == s[i].Command() {
			j++
		}
		p := s[i].Command()
		if j-i > 1 {
			p += fmt.Sprintf(" ×%d", j-i)
		}
		parts = append(parts, p)
		i = j
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// CountCommand counts the calls whose subcommand is cmd ("up").
func CountCommand(calls []Call, cmd string) int {
	n := 0
	for _, c := range calls {
		if c.Cmd == cmd {
			n++
		}
	}
	return n
}

// Failed lists the calls that exited non-zero, for warnings.
func Failed(calls []Call) []Call {
	var out []Call
	for _, c := range calls {
		if c.Exit != 0 {
			out = append(out, c)
		}
	}
	return out
}
