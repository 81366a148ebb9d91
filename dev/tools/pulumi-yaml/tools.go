//go:build tools

// Package tools pins the Pulumi YAML language host; the Makefile builds its cmd/pulumi-language-yaml.
package tools

import _ "github.com/pulumi/pulumi-yaml/cmd/pulumi-language-yaml"
