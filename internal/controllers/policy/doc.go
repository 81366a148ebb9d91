// Package policy is the StackPolicy and ClusterStackPolicy reconciler, and
// what the Stack reconciler asks of policies: it compiles each policy when
// it changes (internal/policy), reports Ready or InvalidRule in its status,
// and For gathers the policies that select a Stack into the runner's
// Spec.Policy.
package policy
