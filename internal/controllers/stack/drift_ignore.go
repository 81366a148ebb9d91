package stack

import (
	"sort"
	"strings"

	"github.com/stackpilot/stackpilot/api/v1alpha1"
	"github.com/stackpilot/stackpilot/internal/runner"
)

// driftFilter is the outcome of applying spec.driftDetection.ignore to what a
// refresh preview found.
type driftFilter struct {
	// Drifted are the resources with drift that is not ignored, each with the
	// paths that are not ignored, in the order the engine reported them.
	Drifted []v1alpha1.DriftedResource
	// Ignored are, per URN, the drifted paths the rules ignore: a remediate
	// passes them to the runner as ignoreChanges so that it leaves them as
	// they are. A resource ignored as a whole (a rule without properties)
	// maps to nil and is excluded from the remediate.
	Ignored map[string][]string
	// IgnoredResources are the same, in the order the engine reported them,
	// for status.drift.ignored.
	IgnoredResources []v1alpha1.DriftedResource
}

// filterDrift applies the ignore rules. A drift on ignored paths only is no
// drift; a resource that drifted on ignored and other paths is reported with
// the other paths alone. A deletion is ignored only by a rule for the whole
// resource: no property of a gone resource is "meant to change".
func filterDrift(changes []runner.ResourceChange, rules []v1alpha1.DriftIgnoreRule) driftFilter {
	out := driftFilter{Ignored: map[string][]string{}}
	for _, c := range changes {
		name, typ := urnNameType(c.URN)
		if typ == "" {
			typ = c.Type
		}
		wholeIgnored, pathRules := matchingRules(rules, typ, name)
		if wholeIgnored {
			out.Ignored[c.URN] = nil
			out.IgnoredResources = append(out.IgnoredResources, v1alpha1.DriftedResource{URN: c.URN, Type: typ, Name: name, Op: c.Op})
			continue
		}
		paths := c.Paths
		if len(paths) == 0 {
			paths = c.Properties
		}
		var kept, ignored []string
		for _, p := range paths {
			if pathIgnored(pathRules, p) {
				ignored = append(ignored, p)
			} else {
				kept = append(kept, p)
			}
		}
		if len(ignored) > 0 {
			out.Ignored[c.URN] = ignored
			out.IgnoredResources = append(out.IgnoredResources, v1alpha1.DriftedResource{URN: c.URN, Type: typ, Name: name, Op: c.Op, Properties: ignored})
		}
		if c.Op != "delete" && len(paths) > 0 && len(kept) == 0 {
			continue // only ignored paths drifted
		}
		out.Drifted = append(out.Drifted, v1alpha1.DriftedResource{
			URN: c.URN, Type: typ, Name: name, Op: c.Op, Properties: kept,
		})
	}
	return out
}

// matchingRules returns whether a rule for the whole resource matches, and
// else the property paths of the rules that match the type and name.
func matchingRules(rules []v1alpha1.DriftIgnoreRule, typ, name string) (whole bool, paths [][]string) {
	for _, r := range rules {
		if !globMatch(orStar(r.Type), typ) || !globMatch(orStar(r.Name), name) {
			continue
		}
		if len(r.Properties) == 0 {
			return true, nil
		}
		for _, p := range r.Properties {
			paths = append(paths, splitPropertyPath(p))
		}
	}
	return false, paths
}

func orStar(s string) string {
	if s == "" {
		return "*"
	}
	return s
}

// pathIgnored is true when a rule path covers p: each of its elements matches
// (as a glob) the element of p at the same place, and p may go on below it.
func pathIgnored(rules [][]string, p string) bool {
	elems := splitPropertyPath(p)
	for _, rule := range rules {
		if len(rule) == 0 || len(rule) > len(elems) {
			continue
		}
		match := true
		for i, r := range rule {
			if !globMatch(r, elems[i]) {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

// splitPropertyPath splits a path in Pulumi's syntax into its elements:
// `metadata.annotations["cert-manager.io/x"]` -> metadata, annotations,
// cert-manager.io/x; `spec.ports[0].port` -> spec, ports, 0, port.
func splitPropertyPath(p string) []string {
	var elems []string
	var cur strings.Builder
	flush := func() {
		if cur.Len() > 0 {
			elems = append(elems, cur.String())
			cur.Reset()
		}
	}
	for i := 0; i < len(p); i++ {
		switch c := p[i]; c {
		case '.':
			flush()
		case '[':
			flush()
			end := strings.IndexByte(p[i:], ']')
			if end < 0 {
				cur.WriteString(p[i:])
				i = len(p)
				continue
			}
			inner := p[i+1 : i+end]
			if len(inner) >= 2 && inner[0] == '"' && inner[len(inner)-1] == '"' {
				inner = strings.ReplaceAll(inner[1:len(inner)-1], `\"`, `"`)
			}
			elems = append(elems, inner)
			i += end
		default:
			cur.WriteByte(c)
		}
	}
	flush()
	return elems
}

// globMatch matches s against a pattern where '*' is any run of characters
// (slashes and colons included: type tokens and annotation keys have them)
// and '?' any one character.
func globMatch(pattern, s string) bool {
	for len(pattern) > 0 {
		switch pattern[0] {
		case '*':
			pattern = strings.TrimLeft(pattern, "*")
			if pattern == "" {
				return true
			}
			for i := 0; i <= len(s); i++ {
				if globMatch(pattern, s[i:]) {
					return true
				}
			}
			return false
		case '?':
			if s == "" {
				return false
			}
			pattern, s = pattern[1:], s[1:]
		default:
			if s == "" || pattern[0] != s[0] {
				return false
			}
			pattern, s = pattern[1:], s[1:]
		}
	}
	return s == ""
}

// boundDrift keeps status.drift within its limits: the first resources and,
// for each, the first property paths (sorted, for a stable status).
func boundDrift(drifted []v1alpha1.DriftedResource) []v1alpha1.DriftedResource {
	out := make([]v1alpha1.DriftedResource, 0, min(len(drifted), v1alpha1.MaxDriftResources))
	for _, d := range drifted[:min(len(drifted), v1alpha1.MaxDriftResources)] {
		props := append([]string(nil), d.Properties...)
		sort.Strings(props)
		d.Properties = props[:min(len(props), v1alpha1.MaxDriftProperties)]
		if len(d.Properties) == 0 {
			d.Properties = nil
		}
		d.URN, d.Type, d.Name = cutUTF8(d.URN, 1024), cutUTF8(d.Type, 512), cutUTF8(d.Name, 512)
		for i, p := range d.Properties {
			d.Properties[i] = cutUTF8(p, 1024)
		}
		out = append(out, d)
	}
	return out
}

// urnNameType splits "urn:pulumi:stack::project::parent$type::name" into the
// logical name and the resource's own type token.
func urnNameType(urn string) (name, typ string) {
	parts := strings.SplitN(urn, "::", 4)
	if len(parts) < 4 {
		return "", ""
	}
	types := strings.Split(parts[2], "$")
	return parts[3], types[len(types)-1]
}

// ignoredFromStatus is the ignore map of the last check, from status.drift,
// for a retried remediate.
func ignoredFromStatus(stack *v1alpha1.Stack) map[string][]string {
	d := stack.Status.Drift
	if d == nil || len(d.Ignored) == 0 {
		return nil
	}
	m := make(map[string][]string, len(d.Ignored))
	for _, r := range d.Ignored {
		m[r.URN] = r.Properties
	}
	return m
}
