// Package alert is the Alert reconciler: it keeps each Alert's status
// (Ready, delivery counts) and runs the notifier (internal/notify), which
// watches every Stack's status on its own informer handler, so that no
// message ever holds a Stack's reconcile.
package alert
