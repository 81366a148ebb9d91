package cluster

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// The API server writes an audit log (metadata only: who did what to which
// object, and the answer; never a request or response body, so no Secret data)
// to <Dir>/logs/audit.log. It is how a test proves least privilege: a request
// the RBAC refused is a 403 there, whether or not the client logged it.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
`

func (c *Cluster) auditPolicyPath() string { return filepath.Join(c.Dir, "audit-policy.yaml") }

// AuditLogPath is the API server's audit log.
func (c *Cluster) AuditLogPath() string { return filepath.Join(c.Dir, "logs", "audit.log") }

func (c *Cluster) writeAuditPolicy() error {
	return os.WriteFile(c.auditPolicyPath(), []byte(auditPolicy), 0o644)
}

// auditEvent is the part of an audit.k8s.io/v1 Event that Denied reads.
type auditEvent struct {
	Stage string `json:"stage"`
	Verb  string `json:"verb"`
	User  struct {
		Username string `json:"username"`
	} `json:"user"`
	// ImpersonatedUser is whom the request acted as, when the authenticated
	// user impersonated someone; then it is the user RBAC judged.
	ImpersonatedUser *struct {
		Username string `json:"username"`
	} `json:"impersonatedUser"`
	UserAgent string `json:"userAgent"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
	} `json:"objectRef"`
	RequestURI     string `json:"requestURI"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// Denied lists the requests of username (or made as username by
// impersonation) that the API server refused with 403 Forbidden, one line each ("verb resource.group/subresource namespace/name by
// user agent"), distinct and sorted.
func (c *Cluster) Denied(username string) ([]string, error) {
	f, err := os.Open(c.AuditLogPath())
	if err != nil {
		return nil, fmt.Errorf("cluster: audit log: %w", err)
	}
	defer f.Close()
	seen := map[string]bool{}
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 16<<20)
	for s.Scan() {
		var e auditEvent
		if err := json.Unmarshal(s.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("cluster: audit log: %w", err)
		}
		user := e.User.Username
		if e.ImpersonatedUser != nil {
			user = e.ImpersonatedUser.Username
		}
		if user != username || e.ResponseStatus == nil || e.ResponseStatus.Code != 403 {
			continue
		}
		what := e.RequestURI
		if r := e.ObjectRef; r != nil {
			what = r.Resource
			if r.APIGroup != "" {
				what += "." + r.APIGroup
			}
			if r.Subresource != "" {
				what += "/" + r.Subresource
			}
			where := r.Name
			if r.Namespace != "" {
				where = r.Namespace + "/" + r.Name
			}
			what = strings.TrimSpace(what + " " + where)
		}
		line := e.Verb + " " + what
		if agent, _, _ := strings.Cut(e.UserAgent, " "); agent != "" {
			line += " by " + agent
		}
		seen[line] = true
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("cluster: audit log: %w", err)
	}
	denied := make([]string, 0, len(seen))
	for d := range seen {
		denied = append(denied, d)
	}
	sort.Strings(denied)
	return denied, nil
}
