//go:build tools

// Package tools pins the Pulumi CLI; the Makefile builds github.com/pulumi/pulumi/pkg/v3/cmd/pulumi from it.
package tools

import _ "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi"
