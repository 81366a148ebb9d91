package convert

import (
	"encoding/json"
	"fmt"
)

// The identity a program acts as. Under PKO it ran in a workspace Pod as that
// Pod's ServiceAccount: the workspace template's when it names one (PKO
// merges the template over the workspace it builds from the Stack), else
// spec.serviceAccountName, else the namespace's "default". In Stackpilot a
// Stack without spec.serviceAccountName acts as the controller's
// --default-service-account, or as the controller itself: more rights than it
// had. So the conversion always writes the ServiceAccount PKO used, as it
// writes PKO's default backend.

// pkoDefaultServiceAccount is what PKO's workspace Pods run as when nothing
// names a ServiceAccount.
const pkoDefaultServiceAccount = "default"

// convertServiceAccount sets spec.serviceAccountName, taking the template's
// serviceAccountName out of spec.workspaceTemplate (the rest of it is
// dropped() with a warning, as before).
func (s *stackConv) convertServiceAccount() {
	spec := &s.out.Spec
	var own string
	s.take("serviceAccountName", &own)
	fromTemplate, field := s.templateServiceAccount()
	switch {
	case fromTemplate != "":
		spec.ServiceAccountName = fromTemplate
		if own != "" && own != fromTemplate {
			s.warn("spec.serviceAccountName", "%q left out: %s %q overrides it, as in PKO, whose workspace Pod ran as that ServiceAccount", own, field, fromTemplate)
		}
	case own != "":
		spec.ServiceAccountName = own
	default:
		spec.ServiceAccountName = pkoDefaultServiceAccount
	}
}

// templateServiceAccount removes the ServiceAccount from
// spec.workspaceTemplate (spec.podTemplate.spec's wins over spec's: it is
// merged into the Pod last) and returns it with the field it came from.
func (s *stackConv) templateServiceAccount() (name, field string) {
	raw, ok := s.fields["workspaceTemplate"]
	if !ok {
		return "", ""
	}
	var tmpl map[string]any
	if err := json.Unmarshal(raw, &tmpl); err != nil || tmpl == nil {
		return "", "" // dropped() warns about it whole
	}
	wsSpec, _ := tmpl["spec"].(map[string]any)
	if sa, ok := wsSpec["serviceAccountName"].(string); ok && sa != "" {
		name, field = sa, "spec.workspaceTemplate.spec.serviceAccountName"
	}
	delete(wsSpec, "serviceAccountName")
	podTemplate, _ := wsSpec["podTemplate"].(map[string]any)
	podSpec, _ := podTemplate["spec"].(map[string]any)
	if sa, ok := podSpec["serviceAccountName"].(string); ok && sa != "" {
		name, field = sa, "spec.workspaceTemplate.spec.podTemplate.spec.serviceAccountName"
	}
	delete(podSpec, "serviceAccountName")
	if name == "" {
		return "", ""
	}
	s.templateIdentity = true
	pruneEmpty(tmpl)
	if len(tmpl) == 0 {
		delete(s.fields, "workspaceTemplate")
		return name, field
	}
	rest, err := json.Marshal(tmpl)
	if err != nil {
		s.err = fmt.Errorf("%s: spec.workspaceTemplate: %w", objectName("Stack", s.meta), err)
		return "", ""
	}
	s.fields["workspaceTemplate"] = rest
	return name, field
}

// pruneEmpty removes the maps left empty once the ServiceAccount is taken out.
func pruneEmpty(m map[string]any) {
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok {
			pruneEmpty(sub)
			if len(sub) == 0 {
				delete(m, k)
			}
		}
	}
}
