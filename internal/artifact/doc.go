// Package artifact is Stackpilot's content-addressed cache of source trees.
//
// A tree is stored once under <root>/sha256/<hex>/, where <hex> is the
// digest of its content (see Digest), so every Stack that uses the same
// program at the same revision shares one copy, and an operation can refer to
// its program by digest alone (a Job executor, planned but not written yet,
// would fetch it that way). A small
// index maps source keys such as "<url>@<commit>" to digests so a known
// revision is found without touching the network.
//
// Stored files are read-only; operations work in trees made with LinkTree
// (hard links, and private copies of the files Pulumi writes) or CopyTree.
// Untar extracts archives (OCI layers, Flux source artifacts) with limits and
// without letting entries escape the destination.
package artifact
