#!/usr/bin/env bash
# gen-kubernetes-schema.sh VERSION: writes the embedded schema files the Kubernetes
# provider's module does not ship, once per version.
set -euo pipefail
version=$1
dir=$(cd "$(dirname "$0")/../tools/pulumi-kubernetes" && pwd)
marker=$dir/.schema-version
if [[ -f $dir/schema-embed.json && -f $dir/terraform-mapping-embed.json && "$(cat "$marker" 2>/dev/null)" == "$version" ]]; then
	exit 0
fi
cd "$dir"
# `go list -m` only reports a module that is already in the module cache: on a
# fresh machine, download it first.
module=github.com/pulumi/pulumi-kubernetes/provider/v4
go mod download "$module"
moddir=$(go list -m -f '{{.Dir}}' "$module")
if [[ -z $moddir ]]; then
	echo "gen-kubernetes-schema: $module is not in the module cache after go mod download" >&2
	exit 1
fi
src=$moddir/cmd/pulumi-resource-kubernetes
go run ./gen "$src" "$version" .
echo "$version" >"$marker"
