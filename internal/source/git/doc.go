// Package git is Stackpilot's Git source: it resolves references to commits
// with ls-remote (Resolver, shared and cached across Stacks) and puts the
// tree of a commit into the artifact store (Fetcher, cloning each commit
// once). Credentials come from a Secret's data (NewAuth).
//
// Errors are the typed errors of package source: *source.AuthError,
// *source.NotFoundError, *source.TransientError and
// *source.InvalidSpecError. They never contain secret values, and URLs in
// them have their userinfo removed. Kind (kind.go) is spec.source.git for
// the Stack reconciler: it reads the credentials Secret and turns these
// errors into the reconciler's (package serror).
package git
