// Package receiver serves the inbound webhooks of Receivers: it checks a
// request's signature in constant time, bounds its size, drops replays,
// reads the push event of each sender type (GitHub, GitLab, Bitbucket,
// Gitea, generic, generic-hmac, OCI registries) and asks the Stacks whose
// source the event is about to reconcile now, after invalidating the shared
// ls-remote cache of the pushed repository.
package receiver
