package runner

import (
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/pulumi/pulumi/sdk/v3/go/auto/events"
	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
)

// Step operations as the engine names them in events.
const (
	opSame              = string(apitype.OpSame)
	opCreate            = string(apitype.OpCreate)
	opUpdate            = string(apitype.OpUpdate)
	opDelete            = string(apitype.OpDelete)
	opReplace           = string(apitype.OpReplace)
	opCreateReplacement = string(apitype.OpCreateReplacement)
	opDeleteReplaced    = string(apitype.OpDeleteReplaced)
	opRead              = string(apitype.OpRead)
	opRefresh           = string(apitype.OpRefresh)
)

// eventCollector turns the engine's event stream into the per-resource changes,
// the change counts and the error diagnostics of a Result. Values never leave
// the events: only URNs, types, ops and property names are kept.
type eventCollector struct {
	// refreshIsChange is set for refresh and drift-check: the outcome of a refresh
	// step is the change being reported. For up and preview (with Refresh set) the
	// refresh phase only reads the world; the update steps that follow are the changes.
	refreshIsChange bool

	mu        sync.Mutex
	order     []string                   // URNs in first-seen order
	resources map[string]*ResourceChange // by URN, ops other than same/read
	same      map[string]bool            // URNs with a "same" step
	pending   map[string]bool            // URNs whose last pre-event was a refresh step
	// done and failed are the URNs of resources whose step the engine
	// reported finished (an outputs event) or failed: a step only started,
	// or failed, changed nothing that can be counted.
	done, failed map[string]bool
	summary      map[apitype.OpType]int // the engine's own counts, when it sent them
	diags        []string
	engineErr    []string
	policy       []PolicyFinding // policyEvents, at most maxPolicyFindings
}

func newEventCollector(refreshIsChange bool) *eventCollector {
	return &eventCollector{
		refreshIsChange: refreshIsChange,
		resources:       map[string]*ResourceChange{},
		same:            map[string]bool{},
		pending:         map[string]bool{},
		done:            map[string]bool{},
		failed:          map[string]bool{},
	}
}

// consume reads ch until stop is called, then returns once every event already
// received is handled. It does not wait for ch to close: a producer that fails
// may never close it. Operations feed the collector from the CLI's event log
// file instead (eventlog.go); this channel form is what the collector's tests
// drive it with.
func (c *eventCollector) consume(ch <-chan events.EngineEvent) (stop func()) {
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case ev, ok := <-ch:
				if !ok {
					ch = nil // closed: wait for quit
					continue
				}
				c.handle(ev)
			case <-quit:
				return
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(quit) })
		<-done
	}
}

func (c *eventCollector) handle(ev events.EngineEvent) {
	defer func() { _ = recover() }() // a malformed event must not take the runner down
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case ev.ResourcePreEvent != nil:
		c.step(ev.ResourcePreEvent.Metadata, true)
	case ev.ResOutputsEvent != nil:
		c.step(ev.ResOutputsEvent.Metadata, false)
		c.done[ev.ResOutputsEvent.Metadata.URN] = true
	case ev.ResOpFailedEvent != nil:
		c.step(ev.ResOpFailedEvent.Metadata, false)
		c.failed[ev.ResOpFailedEvent.Metadata.URN] = true
	case ev.DiagnosticEvent != nil:
		c.diagnostic(*ev.DiagnosticEvent)
	case ev.SummaryEvent != nil:
		c.summary = ev.SummaryEvent.ResourceChanges
	case ev.ErrorEvent != nil:
		c.engineErr = append(c.engineErr, cleanLines(ev.ErrorEvent.Error)...)
	case ev.PolicyEvent != nil:
		c.policyEvent(*ev.PolicyEvent)
	}
}

func (c *eventCollector) step(m apitype.StepEventMetadata, pre bool) {
	op := string(m.Op)
	if m.URN == "" {
		return
	}
	if op == opRefresh {
		// The pre-event of a refresh says only "refreshing"; its result (same,
		// update, delete) arrives with the outputs event.
		c.pending[m.URN] = true
		return
	}
	fromRefresh := !pre && c.pending[m.URN]
	if pre {
		delete(c.pending, m.URN)
	}
	if fromRefresh != c.refreshIsChange {
		return // a refresh result during up/preview, or a non-refresh step during refresh
	}
	switch op {
	case opRead, "read-replacement", "discard", "discard-replaced":
		return
	case opCreateReplacement, opDeleteReplaced:
		op = opReplace
	}
	if op == opSame {
		if c.resources[m.URN] == nil {
			c.same[m.URN] = true
		}
		return
	}
	delete(c.same, m.URN)
	rc := c.resources[m.URN]
	if rc == nil {
		rc = &ResourceChange{URN: m.URN, Type: m.Type, Op: op}
		c.resources[m.URN] = rc
		c.order = append(c.order, m.URN)
	}
	if op == opReplace || rc.Op == opSame {
		rc.Op = op
	}
	rc.Properties = mergeNames(rc.Properties, changedProperties(m))
	rc.Paths = mergeNames(rc.Paths, changedPaths(m))
}

// changedPaths are the full property paths a step changes, in Pulumi's path
// syntax ("data.key", `metadata.annotations["x/y"]`): the keys of the detailed
// diff, or the engine's top-level "diffs" when it sent no detailed diff. Drift
// ignore rules and ignoreChanges work on these paths, not on the roots.
func changedPaths(m apitype.StepEventMetadata) []string {
	if len(m.DetailedDiff) == 0 {
		return append([]string(nil), m.Diffs...)
	}
	paths := make([]string, 0, len(m.DetailedDiff))
	for path := range m.DetailedDiff {
		paths = append(paths, path)
	}
	return paths
}

// changedProperties names the top-level properties a step changes: the engine's
// "diffs", or the roots of the detailed diff's paths when diffs is empty.
func changedProperties(m apitype.StepEventMetadata) []string {
	names := append([]string(nil), m.Diffs...)
	if len(names) == 0 {
		for path := range m.DetailedDiff {
			names = append(names, rootOfPath(path))
		}
	}
	return names
}

// rootOfPath returns the first element of a property path: "data.key" and
// "data[\"a.b\"]" -> "data", "[\"odd.name\"]" -> "odd.name".
func rootOfPath(path string) string {
	if strings.HasPrefix(path, `["`) {
		if end := strings.Index(path, `"]`); end > 2 {
			return path[2:end]
		}
	}
	if i := strings.IndexAny(path, ".["); i > 0 {
		return path[:i]
	}
	return path
}

func mergeNames(a, b []string) []string {
	set := map[string]bool{}
	for _, n := range append(a, b...) {
		if n != "" {
			set[n] = true
		}
	}
	if len(set) == 0 {
		return nil
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (c *eventCollector) diagnostic(d apitype.DiagnosticEvent) {
	// "info#err" is what the language host wrote to stderr: Pulumi YAML reports
	// program errors (an undefined variable, a bad type) that way, not as "error".
	if d.Severity != "error" && d.Severity != "info#err" {
		return
	}
	lines := slices.DeleteFunc(cleanLines(d.Message), isAmbientPluginWarning)
	if len(lines) == 0 {
		return
	}
	// Name the resource the way Pulumi's own output does, so the line says where.
	if name, typ := urnNameType(d.URN); name != "" && typ != "pulumi:pulumi:Stack" {
		lines[0] = typ + " (" + name + "): " + lines[0]
	}
	c.diags = append(c.diags, lines...)
}

// ambientPluginWarning is the line Pulumi writes each time it uses a
// plugin it found on $PATH rather than in its plugin cache
// (sdk/go/common/workspace/plugins.go). The controller image and bin/ keep
// the pinned plugins on PATH on purpose, beside the CLI, and the YAML
// language host writes the line to its stderr (an "info#err" diagnostic),
// so without this filter it would come first, twice, in every failure
// message of a program with an explicit provider. It says nothing the user
// can act on; the engine log keeps it.
var ambientPluginWarning = regexp.MustCompile(`^warning: using pulumi-[a-z]+-[A-Za-z0-9_.-]+ from \$PATH at \S+( expected \S+)?$`)

func isAmbientPluginWarning(line string) bool { return ambientPluginWarning.MatchString(line) }

// urnNameType splits "urn:pulumi:stack::project::type$type::name".
func urnNameType(urn string) (name, typ string) {
	parts := strings.Split(urn, "::")
	if len(parts) < 4 {
		return "", ""
	}
	name = parts[len(parts)-1]
	types := strings.Split(parts[len(parts)-2], "$")
	return name, types[len(types)-1]
}

// changes returns the changed resources in the order the engine reported them.
func (c *eventCollector) changes() []ResourceChange {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []ResourceChange
	for _, urn := range c.order {
		if rc := c.resources[urn]; rc != nil {
			out = append(out, *rc)
		}
	}
	return out
}

// counts uses the engine's summary when it sent one, because it is the count
// Pulumi prints; else (live progress, or an operation cut short) it tallies
// the steps the engine reported finished: a failed step, or one still
// running, has made no change to count.
func (c *eventCollector) counts() ChangeCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.summary != nil {
		s := c.summary
		replace := s[apitype.OpReplace]
		if replace == 0 {
			replace = max(s[apitype.OpCreateReplacement], s[apitype.OpDeleteReplaced])
		}
		return ChangeCounts{
			Create:  s[apitype.OpCreate],
			Update:  s[apitype.OpUpdate],
			Replace: replace,
			Delete:  s[apitype.OpDelete],
			Same:    s[apitype.OpSame],
		}
	}
	var cc ChangeCounts
	for urn, rc := range c.resources {
		if !c.done[urn] || c.failed[urn] {
			continue
		}
		switch rc.Op {
		case opCreate:
			cc.Create++
		case opUpdate:
			cc.Update++
		case opReplace:
			cc.Replace++
		case opDelete:
			cc.Delete++
		}
	}
	cc.Same = len(c.same)
	return cc
}

// errors returns the error diagnostics, cleaned and deduplicated, falling back
// to the engine's error events.
func (c *eventCollector) errors() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.diags) > 0 {
		return dedupe(c.diags)
	}
	return dedupe(c.engineErr)
}
