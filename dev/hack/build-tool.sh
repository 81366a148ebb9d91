#!/usr/bin/env bash
# build-tool.sh NAME VERSION MODULE_DIR PACKAGE [go build flags...]
#
# Builds one pinned tool from its own module MODULE_DIR (dev/tools/..., relative
# to the repository) into bin/NAME. The stamp bin/.stamps/NAME holds the tool's
# key: its pinned version plus a hash of its module files (paths relative to
# MODULE_DIR, so moving the folder keeps the stamp), its build flags and
# CGO_ENABLED and GOFLAGS, so a second run with nothing changed does no work and a change
# of flags rebuilds. Prints one line.
set -euo pipefail
name=$1 version=$2 moddir=$3 pkg=$4
shift 4
root=$(cd "$(dirname "$0")/../.." && pwd) # the repository (this is dev/hack)
bin=$root/bin
mkdir -p "$bin/.stamps"
key="$version $( (cd "$root/$moddir" && find . -maxdepth 2 \( -name 'go.mod' -o -name 'go.sum' -o -name '*.go' \) -print0 | sort -z | xargs -0 sha256sum; echo "CGO_ENABLED=${CGO_ENABLED:-} GOFLAGS=${GOFLAGS:-} $pkg $*") | sha256sum | cut -c1-16)"
stamp=$bin/.stamps/$name
if [[ -x $bin/$name && -f $stamp && "$(cat "$stamp")" == "$key" ]]; then
	echo "tools: $name $version up to date"
	exit 0
fi
start=$(date +%s)
(cd "$root/$moddir" && go build -o "$bin/$name.tmp" "$@" "$pkg")
mv "$bin/$name.tmp" "$bin/$name"
echo "$key" >"$stamp"
echo "tools: $name $version built in $(($(date +%s) - start))s"
