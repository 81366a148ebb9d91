// Package testenv is the test harness of the dev module: everything of the
// product's internal/testenv (control plane, Git server, registry, Flux
// artifacts), re-exported under the same names, plus what only the end-to-end
// and cluster tests, the demo and the benchmarks run: the controller as its
// own process (dev/internal/controllerproc), Flux's source-controller and
// kustomize-controller as processes, the one-node cluster
// (dev/internal/cluster), an S3 server and the image pushers.
//
// It keeps the product's package name so that a test moved into the dev
// module changes only its import line. It lives here, not in the product,
// because its dependencies (gofakes3, the cluster's image builder) are not
// the product's: the product go.mod does not require them.
package testenv
