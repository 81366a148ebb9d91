#!/usr/bin/env bash
# kustomize-crds.sh VERSION: copies the Kustomization CRD from the pinned kustomize-controller
# module into bin/crds/kustomize, once per version. It is a directory of its own so that
# bin/crds/flux (installed by testenv's Options.FluxCRDs) keeps only source-controller's CRDs
# and its own version stamp; testenv.InstallKustomizeCRDs installs this one.
set -euo pipefail
version=$1
root=$(cd "$(dirname "$0")/../.." && pwd) # the repository (this is dev/hack)
out=$root/bin/crds/kustomize
if [[ "$(cat "$out/.version" 2>/dev/null)" == "$version" ]]; then
	echo "tools: flux kustomize CRDs $version up to date"
	exit 0
fi
# `go list -m` only reports a module already in the module cache.
moddir=$(cd "$root/dev/tools/flux" && go mod download github.com/fluxcd/kustomize-controller && go list -m -f '{{.Dir}}' github.com/fluxcd/kustomize-controller)
if [[ -z $moddir ]]; then
	echo "kustomize-crds: github.com/fluxcd/kustomize-controller is not in the module cache after go mod download" >&2
	exit 1
fi
src=$moddir/config/crd/bases
rm -rf "$out" && mkdir -p "$out"
cp "$src"/*.yaml "$out"/
chmod u+w "$out"/*.yaml
echo "$version" >"$out/.version"
echo "tools: flux kustomize CRDs $version copied ($(ls "$out"/*.yaml | wc -l) files)"
