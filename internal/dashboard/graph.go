package dashboard

import (
	"cmp"
	"net/http"
	"slices"
	"strings"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
)

// The graph page: which Stacks wait for which (spec.dependsOn) and read
// whose outputs (spec.configFrom[].stackOutputs), as a drawing. The server
// finds the nodes, the edges and the cycles; the page lays them out.

// EdgeKind is why one Stack points at another.
type EdgeKind string

const (
	EdgeDependsOn    EdgeKind = "dependsOn"
	EdgeStackOutputs EdgeKind = "stackOutputs"
)

// GraphNode is a Stack on the graph. Known is false for a Stack that is
// named by an edge but that the caller may not see or that does not exist
// (in this shard): its name is shown, as the referring Stack's spec shows
// it, and nothing else.
type GraphNode struct {
	ID        string  `json:"id"` // namespace/name
	Namespace string  `json:"namespace"`
	Name      string  `json:"name"`
	Known     bool    `json:"known"`
	States    []State `json:"states,omitempty"`
}

// GraphEdge points from the Stack that waits or reads (From) to the one it
// waits for or reads (To).
type GraphEdge struct {
	From           string   `json:"from"`
	To             string   `json:"to"`
	Kind           EdgeKind `json:"kind"`
	CrossNamespace bool     `json:"crossNamespace,omitempty"`
	// InCycle: the edge closes a cycle, so neither end can ever become
	// Ready (the controller reports DependencyCycle).
	InCycle bool `json:"inCycle,omitempty"`
}

// Graph is what the page draws.
type Graph struct {
	Nodes  []GraphNode `json:"nodes"`
	Edges  []GraphEdge `json:"edges"`
	Cycles [][]string  `json:"cycles,omitempty"`
	// Unlinked counts the visible Stacks with no edge, which are left off.
	Unlinked int `json:"unlinked"`
	// Truncated: more than MaxGraphNodes nodes; filter by namespace.
	Truncated bool `json:"truncated,omitempty"`
}

// MaxGraphNodes bounds a drawing: past it, the page asks for a namespace.
const MaxGraphNodes = 400

func nodeID(ns, name string) string { return ns + "/" + name }

// buildGraph draws the edges of stacks (those the caller may see). A
// Stack that neither points nor is pointed at is counted, not drawn.
func buildGraph(stacks []*v1alpha1.Stack) Graph {
	known := map[string]*v1alpha1.Stack{}
	for _, s := range stacks {
		known[nodeID(s.Namespace, s.Name)] = s
	}
	g := Graph{Nodes: []GraphNode{}, Edges: []GraphEdge{}}
	seen := map[GraphEdge]bool{}
	add := func(s *v1alpha1.Stack, ns, name string, kind EdgeKind) {
		if ns == "" {
			ns = s.Namespace
		}
		e := GraphEdge{From: nodeID(s.Namespace, s.Name), To: nodeID(ns, name), Kind: kind, CrossNamespace: ns != s.Namespace}
		if !seen[e] {
			seen[e] = true
			g.Edges = append(g.Edges, e)
		}
	}
	for _, s := range stacks {
		for _, d := range s.Spec.DependsOn {
			add(s, d.Namespace, d.Name, EdgeDependsOn)
		}
		for _, c := range s.Spec.ConfigFrom {
			if o := c.StackOutputs; o != nil {
				add(s, o.Namespace, o.Name, EdgeStackOutputs)
			}
		}
	}
	linked := map[string]bool{}
	for _, e := range g.Edges {
		linked[e.From], linked[e.To] = true, true
	}
	for id := range linked {
		n := GraphNode{ID: id}
		if s := known[id]; s != nil {
			n.Namespace, n.Name, n.Known, n.States = s.Namespace, s.Name, true, statesOf(s)
		} else {
			n.Namespace, n.Name = splitID(id)
		}
		g.Nodes = append(g.Nodes, n)
	}
	g.Unlinked = len(stacks)
	for _, s := range stacks {
		if linked[nodeID(s.Namespace, s.Name)] {
			g.Unlinked--
		}
	}
	slices.SortFunc(g.Nodes, func(a, b GraphNode) int { return cmp.Compare(a.ID, b.ID) })
	slices.SortFunc(g.Edges, func(a, b GraphEdge) int {
		return cmp.Or(cmp.Compare(a.From, b.From), cmp.Compare(a.To, b.To), cmp.Compare(a.Kind, b.Kind))
	})
	g.Cycles = markCycles(&g)
	if len(g.Nodes) > MaxGraphNodes {
		g.Truncated = true
		g.Nodes, g.Edges, g.Cycles = []GraphNode{}, []GraphEdge{}, nil
	}
	return g
}

func splitID(id string) (string, string) {
	ns, name, _ := strings.Cut(id, "/")
	return ns, name
}

// markCycles finds the strongly connected components with more than one
// Stack (or a Stack that points at itself), marks their edges, and returns
// each cycle's Stacks, sorted. Tarjan's algorithm, iterating over the
// nodes in a fixed order so the answer is the same each time.
func markCycles(g *Graph) [][]string {
	out := map[string][]string{}
	for _, e := range g.Edges {
		out[e.From] = append(out[e.From], e.To)
	}
	index, low := map[string]int{}, map[string]int{}
	onStack := map[string]bool{}
	var stack []string
	var comps [][]string
	next := 0
	var visit func(v string)
	visit = func(v string) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for _, w := range out[v] {
			if _, seen := index[w]; !seen {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] != index[v] {
			return
		}
		var comp []string
		for {
			w := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			onStack[w] = false
			comp = append(comp, w)
			if w == v {
				break
			}
		}
		comps = append(comps, comp)
	}
	for _, n := range g.Nodes {
		if _, seen := index[n.ID]; !seen {
			visit(n.ID)
		}
	}
	member := map[string]int{}
	var cycles [][]string
	for _, comp := range comps {
		selfLoop := len(comp) == 1 && slices.Contains(out[comp[0]], comp[0])
		if len(comp) < 2 && !selfLoop {
			continue
		}
		slices.Sort(comp)
		cycles = append(cycles, comp)
		for _, id := range comp {
			member[id] = len(cycles)
		}
	}
	for i, e := range g.Edges {
		if m := member[e.From]; m != 0 && m == member[e.To] {
			g.Edges[i].InCycle = true
		}
	}
	slices.SortFunc(cycles, func(a, b []string) int { return cmp.Compare(a[0], b[0]) })
	return cycles
}

// graph answers GET /api/graph[?namespace=]: the edges among the Stacks
// the caller may see.
func (s *Server) graph(w http.ResponseWriter, r *http.Request, c caller) {
	stacks, partial, ok := s.visibleStacks(w, r, c)
	if !ok {
		return
	}
	writeJSON(w, struct {
		Graph
		Partial bool `json:"partial,omitempty"`
	}{buildGraph(stacks), partial})
}

// visibleStacks lists the Stacks the caller may get (in ?namespace=).
func (s *Server) visibleStacks(w http.ResponseWriter, r *http.Request, c caller) ([]*v1alpha1.Stack, bool, bool) {
	var list v1alpha1.StackList
	return listVisible(s, w, r, c, resourceStacks, &list, func() []*v1alpha1.Stack {
		out := make([]*v1alpha1.Stack, len(list.Items))
		for i := range list.Items {
			out[i] = &list.Items[i]
		}
		return out
	})
}
