#!/usr/bin/env bash
# flux-crds.sh VERSION: copies the Flux source CRDs from the pinned source-controller
# module into bin/crds/flux, once per version.
set -euo pipefail
version=$1
root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/bin/crds/flux
if [[ "$(cat "$out/.version" 2>/dev/null)" == "$version" ]]; then
	echo "tools: flux source CRDs $version up to date"
	exit 0
fi
src=$(cd "$root/tools/source-controller" && go list -m -f '{{.Dir}}' github.com/fluxcd/source-controller)/config/crd/bases
rm -rf "$out" && mkdir -p "$out"
cp "$src"/*.yaml "$out"/
chmod u+w "$out"/*.yaml
echo "$version" >"$out/.version"
echo "tools: flux source CRDs $version copied ($(ls "$out"/*.yaml | wc -l) files)"
