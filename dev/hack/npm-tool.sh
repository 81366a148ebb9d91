#!/usr/bin/env bash
# npm-tool.sh NAME PACKAGE_DIR SCRIPT
#
# Installs the npm packages pinned by PACKAGE_DIR's package.json and
# package-lock.json (dev/tools/..., relative to the repository) with `npm ci`
# into bin/.npm/NAME, and writes bin/NAME: a script that runs SCRIPT (a path
# under that node_modules) with node. The stamp bin/.stamps/NAME holds a hash
# of the two files and SCRIPT, so a second run with nothing changed does no
# work. Install scripts are not run: the tools here are plain JavaScript.
# Prints one line.
set -euo pipefail
name=$1 pkgdir=$2 script=$3
root=$(cd "$(dirname "$0")/../.." && pwd) # the repository (this is dev/hack)
bin=$root/bin
mkdir -p "$bin/.stamps"
key="$( (cd "$root/$pkgdir" && sha256sum package.json package-lock.json; echo "$script") | sha256sum | cut -c1-16)"
stamp=$bin/.stamps/$name
if [[ -x $bin/$name && -f $stamp && "$(cat "$stamp")" == "$key" ]]; then
	echo "tools: $name up to date"
	exit 0
fi
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
	echo "tools: $name needs node and npm on PATH (Debian: apt-get install nodejs npm)" >&2
	exit 1
fi
start=$(date +%s)
dest=$bin/.npm/$name
rm -rf "$dest" && mkdir -p "$dest"
cp "$root/$pkgdir/package.json" "$root/$pkgdir/package-lock.json" "$dest/"
(cd "$dest" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null)
test -f "$dest/node_modules/$script" || { echo "tools: $name: $script is not in the installed packages" >&2; exit 1; }
cat >"$bin/$name.tmp" <<SCRIPT
#!/bin/sh
# Written by dev/hack/npm-tool.sh from $pkgdir.
exec node "$dest/node_modules/$script" "\$@"
SCRIPT
chmod +x "$bin/$name.tmp"
mv "$bin/$name.tmp" "$bin/$name"
echo "$key" >"$stamp"
echo "tools: $name $(node -p "require('$dest/node_modules/${script%%/*}/package.json').version") installed in $(($(date +%s) - start))s"
