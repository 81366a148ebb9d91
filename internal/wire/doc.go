// Package wire is the HTTP contract between the controller's HTTPS
// listener (internal/server) and the CLI (cmd/stackpilot): the Service
// port's name, the paths of the logs and plans, the headers and query
// parameters, the content types, the JSON shape of an error, and the URLs
// a client builds. Both sides import it, so the contract is written once.
// It imports only the standard library: the CLI links it, and so must
// anything that talks to the controller.
package wire
