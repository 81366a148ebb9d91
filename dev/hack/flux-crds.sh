#!/usr/bin/env bash
# flux-crds.sh VERSION: copies the Flux source CRDs from the pinned source-controller
# module into bin/crds/flux, once per version.
set -euo pipefail
version=$1
root=$(cd "$(dirname "$0")/../.." && pwd) # the repository (this is dev/hack)
out=$root/bin/crds/flux
if [[ "$(cat "$out/.version" 2>/dev/null)" == "$version" ]]; then
	echo "tools: flux source CRDs $version up to date"
	exit 0
fi
# `go list -m` only reports a module already in the module cache.
moddir=$(cd "$root/dev/tools/flux" && go mod download github.com/fluxcd/source-controller && go list -m -f '{{.Dir}}' github.com/fluxcd/source-controller)
if [[ -z $moddir ]]; then
	echo "flux-crds: github.com/fluxcd/source-controller is not in the module cache after go mod download" >&2
	exit 1
fi
src=$moddir/config/crd/bases
rm -rf "$out" && mkdir -p "$out"
cp "$src"/*.yaml "$out"/
chmod u+w "$out"/*.yaml
echo "$version" >"$out/.version"
echo "tools: flux source CRDs $version copied ($(ls "$out"/*.yaml | wc -l) files)"
