package dashboard

import (
	"cmp"
	"slices"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// State is one of the states the fleet page counts and filters by. A Stack
// is in every state that holds of it: a Drifted Stack can be Ready too.
type State string

const (
	StateReady       State = "Ready"
	StateFailing     State = "Failing"
	StateDrifted     State = "Drifted"
	StatePlanPending State = "PlanPending"
	StateSuspended   State = "Suspended"
	StateRunning     State = "Running"
)

// States are the states in the order the page shows them.
var States = []State{StateReady, StateFailing, StateDrifted, StatePlanPending, StateSuspended, StateRunning}

// statesOf says which states hold of s.
func statesOf(s *v1alpha1.Stack) []State {
	var out []State
	ready := apimeta.FindStatusCondition(s.Status.Conditions, v1alpha1.ReadyCondition)
	planPending := apimeta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.PlanPendingCondition)
	switch {
	case ready != nil && ready.Status == metav1.ConditionTrue:
		out = append(out, StateReady)
	case ready != nil && ready.Status == metav1.ConditionFalse && !s.Spec.Suspend && !planPending:
		// Waiting for approval is no failure: PlanPending says it.
		out = append(out, StateFailing)
	}
	if apimeta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.DriftedCondition) {
		out = append(out, StateDrifted)
	}
	if planPending && s.Status.PendingPlan != nil {
		out = append(out, StatePlanPending)
	}
	if s.Spec.Suspend {
		out = append(out, StateSuspended)
	}
	if s.Status.CurrentOperation != nil {
		out = append(out, StateRunning)
	}
	return out
}

// Row is one Stack of the fleet table: what the page shows of it, nothing
// secret (no output values, no config).
type Row struct {
	Namespace string            `json:"namespace"`
	Name      string            `json:"name"`
	Labels    map[string]string `json:"labels,omitempty"`
	States    []State           `json:"states"`
	// Reason and Message are Ready's.
	Reason   string `json:"reason,omitempty"`
	Message  string `json:"message,omitempty"`
	Revision string `json:"revision,omitempty"`
	// Operation is the running operation's type, or the last one's.
	Operation string `json:"operation,omitempty"`
	// Updated is when Ready last changed.
	Updated *time.Time `json:"updated,omitempty"`
}

func rowOf(s *v1alpha1.Stack) Row {
	r := Row{Namespace: s.Namespace, Name: s.Name, Labels: s.Labels, States: statesOf(s)}
	if c := apimeta.FindStatusCondition(s.Status.Conditions, v1alpha1.ReadyCondition); c != nil {
		r.Reason, r.Message = c.Reason, c.Message
		t := c.LastTransitionTime.Time
		r.Updated = &t
	}
	r.Revision = s.Status.LastAppliedRevision
	if s.Status.LastAttemptedRevision != "" {
		r.Revision = s.Status.LastAttemptedRevision
	}
	switch {
	case s.Status.CurrentOperation != nil:
		r.Operation = string(s.Status.CurrentOperation.Type)
	case len(s.Status.History) > 0:
		r.Operation = string(s.Status.History[0].Type) + " " + string(s.Status.History[0].Outcome)
	}
	return r
}

// Query is what the fleet table asks for: filters, order and page.
type Query struct {
	Namespace string
	Selector  labels.Selector // nil: any
	State     State           // "": any
	Name      string          // a substring of the name, ignoring case
	Sort      string          // name (default), namespace, state, updated; a leading "-" reverses
	Page      int             // from 1
	PageSize  int
}

// MaxPageSize bounds one page of the fleet table.
const MaxPageSize = 500

// Fleet is one page of the fleet: the counts by state of every Stack the
// caller may see that the filters (but for the state) select, how many
// the state filter leaves, and the page's rows.
type Fleet struct {
	Counts   map[State]int `json:"counts"`
	Total    int           `json:"total"`
	Page     int           `json:"page"`
	PageSize int           `json:"pageSize"`
	Rows     []Row         `json:"rows"`
}

// page filters, counts, sorts and cuts stacks (the ones the caller may
// see) as q says. Rows are made for the page alone: a page of 50 out of
// 10,000 Stacks sorts 10,000 small keys, not 10,000 rows.
func page(stacks []*v1alpha1.Stack, q Query) Fleet {
	f := Fleet{Counts: map[State]int{}, Page: max(q.Page, 1), PageSize: q.PageSize}
	if f.PageSize <= 0 || f.PageSize > MaxPageSize {
		f.PageSize = 50
	}
	name := strings.ToLower(q.Name)
	type entry struct {
		s      *v1alpha1.Stack
		states []State
	}
	var kept []entry
	for _, s := range stacks {
		if q.Namespace != "" && s.Namespace != q.Namespace {
			continue
		}
		if q.Selector != nil && !q.Selector.Matches(labels.Set(s.Labels)) {
			continue
		}
		if name != "" && !strings.Contains(strings.ToLower(s.Name), name) {
			continue
		}
		st := statesOf(s)
		for _, x := range st {
			f.Counts[x]++
		}
		if q.State != "" && !slices.Contains(st, q.State) {
			continue
		}
		kept = append(kept, entry{s, st})
	}
	f.Total = len(kept)
	key, desc := strings.TrimPrefix(q.Sort, "-"), strings.HasPrefix(q.Sort, "-")
	slices.SortStableFunc(kept, func(a, b entry) int {
		var c int
		switch key {
		case "namespace":
			c = cmp.Compare(a.s.Namespace, b.s.Namespace)
		case "state":
			c = cmp.Compare(stateRank(a.states), stateRank(b.states))
		case "updated":
			c = readySince(a.s).Compare(readySince(b.s))
		}
		if c == 0 {
			c = cmp.Or(cmp.Compare(a.s.Name, b.s.Name), cmp.Compare(a.s.Namespace, b.s.Namespace))
		}
		if desc {
			return -c
		}
		return c
	})
	from := min((f.Page-1)*f.PageSize, len(kept))
	to := min(from+f.PageSize, len(kept))
	f.Rows = make([]Row, 0, to-from)
	for _, e := range kept[from:to] {
		f.Rows = append(f.Rows, rowOf(e.s))
	}
	return f
}

// stateRank orders Stacks by what needs a person first: failing, plan
// pending, drifted, running, suspended, ready.
func stateRank(states []State) int {
	for i, s := range []State{StateFailing, StatePlanPending, StateDrifted, StateRunning, StateSuspended, StateReady} {
		if slices.Contains(states, s) {
			return i
		}
	}
	return 6
}

func readySince(s *v1alpha1.Stack) time.Time {
	if c := apimeta.FindStatusCondition(s.Status.Conditions, v1alpha1.ReadyCondition); c != nil {
		return c.LastTransitionTime.Time
	}
	return time.Time{}
}
