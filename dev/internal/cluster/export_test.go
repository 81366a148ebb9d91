package cluster

// ProcessesMentioning lets the external tests check that Down left no process.
var ProcessesMentioning = processesMentioning
