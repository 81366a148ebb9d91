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
src=$(go list -m -f '{{.Dir}}' github.com/pulumi/pulumi-kubernetes/provider/v4)/cmd/pulumi-resource-kubernetes
go run ./gen "$src" "$version" .
echo "$version" >"$marker"
