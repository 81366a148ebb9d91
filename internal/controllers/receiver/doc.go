// Package receiver is the Receiver reconciler: it reads each Receiver and
// its token Secret, tells the webhook server (internal/receiver, imported
// as webhook) which path serves which Receiver, and reports the path and
// Ready in status. Setup wires both on the manager.
package receiver
