// Package server is the controller's HTTPS listener for people: the engine
// logs of a Stack's operations (LogsHandler) and its full plans
// (PlanHandler), each served only to a caller who may get that Stack
// (readableStack), and the listener both run on (Setup), on every replica.
// The paths, headers and error shape are internal/wire's, which the CLI
// reads too.
package server
