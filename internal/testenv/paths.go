package testenv

import "github.com/stackpilot/stackpilot/internal/toolchain"

// ModuleRoot finds the repository root (toolchain.ModuleRoot).
func ModuleRoot() (string, error) { return toolchain.ModuleRoot() }

// BinDir is where `make tools` puts the pinned binaries; STACKPILOT_BIN
// overrides it (toolchain.BinDir).
func BinDir() (string, error) { return toolchain.BinDir() }

// Paths is ModuleRoot and BinDir together (toolchain.Paths).
func Paths() (root, bin string, err error) { return toolchain.Paths() }

// RequireBinaries checks that the named tools were built, and says how to
// build them (toolchain.Require).
func RequireBinaries(bin string, names ...string) error { return toolchain.Require(bin, names...) }

// PulumiEnv is the environment that runs the pinned Pulumi CLI with the pinned
// plugins, off the network (toolchain.PulumiEnv).
func PulumiEnv(bin string) map[string]string { return toolchain.PulumiEnv(bin) }
