package cluster

// ProcessesMentioning lets the external tests check that Down left no process.
var ProcessesMentioning = processesMentioning

// BridgeName lets the external tests find a cluster's bridge by its directory.
var BridgeName = bridgeName
