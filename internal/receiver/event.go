package receiver

// Event is what a webhook says happened, whatever its sender's format.
type Event struct {
	// Name is the sender's event name ("push", "Push Hook",
	// "repo:refs_changed"), matched against spec.events.
	Name string
	// Ping is a sender's test delivery: answered 200, nothing reconciled.
	Ping bool
	// OCI is true for a registry push; Repositories are then "host/path"
	// and Tags the pushed tags. Otherwise Repositories are Git URLs (any
	// form) and Refs the pushed references (refs/heads/x, refs/tags/t).
	OCI bool
	// Repositories name the one repository the event is about, in each form
	// the sender gives (clone URL, SSH URL, web URL). Empty for a generic
	// event without one: every selected Stack is then asked.
	Repositories []string
	// Refs are the pushed references; empty: any.
	Refs []string
	// DefaultBranch is the repository's default branch when the sender says
	// ("main"), for Stacks that follow the remote HEAD.
	DefaultBranch string
	// Tags are the pushed OCI tags.
	Tags []string
	// PullRequest is set for a pull (merge) request event: the Stacks with
	// spec.previews on its repository and base branch preview it.
	PullRequest *PullRequest
}

// isPullEvent: GitHub's and Gitea's pull request event names (Gitea sends
// its synchronisation and label changes under names of their own).
func isPullEvent(name string) bool {
	switch name {
	case "pull_request", "pull_request_sync", "pull_request_label":
		return true
	}
	return false
}

// Defaults of spec.events per type: the push events of each sender.
var defaultEvents = map[string][]string{
	"github":    {"push"},
	"gitea":     {"push"},
	"gitlab":    {"Push Hook", "Tag Push Hook"},
	"bitbucket": {"repo:refs_changed", "repo:push"},
	"oci":       {"push"},
}

// DefaultEvents returns the events a Receiver of type acts on when
// spec.events is empty; nil means every event.
func DefaultEvents(typ string) []string { return defaultEvents[typ] }

// maxListed bounds how many repositories, refs and tags one event may list,
// so a hostile but signed body cannot make the matching quadratic.
const maxListed = 100

func (e *Event) bound() {
	e.Repositories = bounded(e.Repositories)
	e.Refs = bounded(e.Refs)
	e.Tags = bounded(e.Tags)
}

func bounded(s []string) []string {
	out := s[:0:0]
	seen := map[string]bool{}
	for _, v := range s {
		if v == "" || seen[v] || len(v) > 2048 {
			continue
		}
		seen[v] = true
		out = append(out, v)
		if len(out) == maxListed {
			break
		}
	}
	return out
}
