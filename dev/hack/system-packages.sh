#!/usr/bin/env bash
# system-packages.sh: installs what the one-node cluster (dev/internal/cluster)
# and the test PostgreSQL server (dev/internal/postgres) take from the machine
# rather than from bin/: containerd, runc, the CNI plugins (loopback, bridge,
# host-local), ip (iproute2, for the Pod network's bridge), PostgreSQL, and
# Chromium (the dashboard's browser tests drive it headless), from Debian's
# packages. Does nothing when they are present.
# Without root it installs nothing and says which tests will skip, since the
# cluster itself needs root; with root, a failed install fails the build rather
# than letting the install test skip unnoticed.
set -euo pipefail
packages=(containerd runc containernetworking-plugins iproute2 postgresql chromium)

missing() {
	local b
	for b in containerd containerd-shim-runc-v2 runc ip; do
		command -v "$b" >/dev/null || { echo "$b"; return; }
	done
	for p in loopback bridge host-local; do
		[[ -x /usr/lib/cni/$p ]] || { echo "/usr/lib/cni/$p"; return; }
	done
	compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || { echo "PostgreSQL (/usr/lib/postgresql/*/bin/initdb)"; return; }
	command -v chromium >/dev/null || echo chromium
}

what=$(missing)
if [[ -z $what ]]; then
	echo "system-packages: containerd, runc, the CNI plugins, iproute2, PostgreSQL and Chromium are installed"
	exit 0
fi
if [[ $(id -u) != 0 ]]; then
	echo "system-packages: $what is missing and this is not root: the one-node cluster and PostgreSQL tests (dev/internal/cluster, dev/internal/postgres, dev/test/cluster) and the dashboard's browser tests will skip; as root: apt-get install -y ${packages[*]}"
	exit 0
fi
if ! command -v apt-get >/dev/null; then
	echo "system-packages: $what is missing and there is no apt-get: install ${packages[*]} (containerd 1.6+, runc 1.1+, PostgreSQL) by hand" >&2
	exit 1
fi
start=$(date +%s)
echo "system-packages: $what is missing: apt-get install ${packages[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
what=$(missing)
if [[ -n $what ]]; then
	echo "system-packages: $what is still missing after apt-get install ${packages[*]}" >&2
	exit 1
fi
echo "system-packages: installed ${packages[*]} in $(($(date +%s) - start))s"
