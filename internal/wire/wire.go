package wire

import (
	"net/url"
	"strings"
)

const (
	// PortName is the name of the controller Service's HTTPS port serving
	// the logs and the plans (config/manager/service.yaml): the API
	// server's service proxy is addressed by it.
	PortName = "logs"
	// DashboardPortName is the name of the controller's container and
	// Service port serving the web dashboard (--dashboard-bind-address,
	// :9445 in config/manager): `stackpilot dashboard` port-forwards to it.
	DashboardPortName = "dashboard"

	// LogsPath serves a Stack's engine logs, as text:
	//	GET /logs/<namespace>/<name>[?operation=<id>][&follow=1]
	LogsPath = "/logs/"
	// PlansPath serves a Stack's full plans, as JSON (plan.Document):
	//	GET /plans/<namespace>/<name>[/<id>]
	// and, with ?content=policy-input, what policy rules are tested on
	// (plan.PolicyInput).
	PlansPath = "/plans/"

	// TokenHeader carries the caller's bearer token. Why not Authorization:
	// the API server's service proxy authenticates the caller with that
	// header and then strips it, so it never reaches the controller.
	TokenHeader = "X-Stackpilot-Token"
	// OperationHeader names the operation whose log is served.
	OperationHeader = "X-Stackpilot-Operation"

	// OperationParam asks for the log of one operation (an id of
	// status.history) rather than the last one.
	OperationParam = "operation"
	// FollowParam asks for a running operation's log to be streamed until
	// it ends; see Follows.
	FollowParam = "follow"
	// ContentParam chooses what the plans path serves of a plan: the
	// Document by default, PolicyInputContent for the rules' input.
	ContentParam = "content"
	// PolicyInputContent asks for a plan's Pulumi update plan and prior
	// inputs, secrets masked (plan.PolicyInput).
	PolicyInputContent = "policy-input"

	// ContentJSON is the type of the plans and of every error.
	ContentJSON = "application/json"
	// ContentText is the type of the logs.
	ContentText = "text/plain; charset=utf-8"
)

// Follows says whether the query asks to follow the log: follow=1 or
// follow=true.
func Follows(q url.Values) bool {
	f := q.Get(FollowParam)
	return f == "1" || f == "true"
}

// SplitPath is what follows prefix (LogsPath or PlansPath) in path, split
// at its slashes, with leading and trailing slashes dropped: /logs/ns/web/
// is ns, web. It is nil when path is not under prefix.
func SplitPath(prefix, path string) []string {
	rest, ok := strings.CutPrefix(path, prefix)
	if !ok {
		return nil
	}
	return strings.Split(strings.Trim(rest, "/"), "/")
}

// ProxyURL is the way to the controller's listener through the API
// server's service proxy, at host (the API server's URL): service in
// namespace, port PortName, over HTTPS.
func ProxyURL(host *url.URL, namespace, service string) *url.URL {
	return host.JoinPath("api/v1/namespaces", namespace, "services", "https:"+service+":"+PortName, "proxy")
}

// LogsURL is where base (the listener, or ProxyURL) serves the log of the
// Stack's operation ("" for its last one), followed or not.
func LogsURL(base *url.URL, namespace, name, operation string, follow bool) *url.URL {
	u := base.JoinPath(strings.Trim(LogsPath, "/"), namespace, name)
	q := url.Values{}
	if operation != "" {
		q.Set(OperationParam, operation)
	}
	if follow {
		q.Set(FollowParam, "1")
	}
	u.RawQuery = q.Encode()
	return u
}

// PlanURL is where base serves the Stack's plan id ("" for its pending one).
func PlanURL(base *url.URL, namespace, name, id string) *url.URL {
	if id == "" {
		return base.JoinPath(strings.Trim(PlansPath, "/"), namespace, name)
	}
	return base.JoinPath(strings.Trim(PlansPath, "/"), namespace, name, id)
}

// PolicyInputURL is where base serves the policy input of the Stack's plan
// id ("" for its pending one).
func PolicyInputURL(base *url.URL, namespace, name, id string) *url.URL {
	u := PlanURL(base, namespace, name, id)
	u.RawQuery = url.Values{ContentParam: {PolicyInputContent}}.Encode()
	return u
}
