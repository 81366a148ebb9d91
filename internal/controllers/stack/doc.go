// Package stack is the Stack reconciler: the pipeline that delivers one Stack.
//
// A reconcile runs the observe steps (recover an interrupted operation,
// suspend, resolve the source, check dependencies, resolve the inputs and the
// program, decide), then act runs the steps that routes() maps the decided
// action to (route.go). What an up hands on to when it ends (keep its inputs
// for a rollback, end its approved plan, schedule drift; or make a rollback
// due) is in hooks.go. Steps record findings; summarize.go alone turns them
// into the Ready, Reconciling and Stalled conditions. Finalize destroys a
// Stack with destroyOnDelete. The package also owns the controller's data dir
// (work trees, kept outcomes), its metrics and the engine logs of operations.
//
// What it builds on lives elsewhere: the inputs resolver in internal/inputs,
// the source kinds in internal/source/<kind>, the plan store in
// internal/plan, the runner contract in internal/runner and the executor in
// internal/executor.
package stack
