package testenv

import base "github.com/stackpilot/stackpilot/internal/testenv"

// The product's internal/testenv under the same names, so that the dev
// module's tests reach the whole harness through one import.

type (
	// Options choose what the control plane gets besides the core API.
	Options = base.Options
	// TB is the part of testing.TB that the helpers use.
	TB = base.TB
	// Program is a TB for programs (the benchmarks).
	Program = base.Program
	// FatalError is what Program.Fatalf panics with.
	FatalError = base.FatalError
	// GitServer is a Git server for one test.
	GitServer = base.GitServer
	// GitServerOption configures NewGitServer.
	GitServerOption = base.GitServerOption
	// Registry is an OCI registry for one test.
	Registry = base.Registry
	// RegistryOption configures NewRegistry.
	RegistryOption = base.RegistryOption
	// SyncBuffer collects a command's output while a test reads it.
	SyncBuffer = base.SyncBuffer
)

var (
	ModuleRoot      = base.ModuleRoot
	BinDir          = base.BinDir
	Paths           = base.Paths
	RequireBinaries = base.RequireBinaries
	PulumiEnv       = base.PulumiEnv
	MinParallel     = base.MinParallel

	NewGitServer    = base.NewGitServer
	WithBasicAuth   = base.WithBasicAuth
	WithBearerToken = base.WithBearerToken
	WithSSH         = base.WithSSH
	WithRoot        = base.WithRoot
	WithAddress     = base.WithAddress

	NewRegistry           = base.NewRegistry
	WithReferrers         = base.WithReferrers
	WithRegistryBasicAuth = base.WithRegistryBasicAuth

	PushFluxArtifact = base.PushFluxArtifact
	PullFluxArtifact = base.PullFluxArtifact
)
