#!/usr/bin/env bash
# Checks that every relative Markdown link in README.md, CHANGELOG.md and docs/
# points at a file or folder that exists and, for a link to a heading
# (file.md#anchor or #anchor), at a heading that exists (GitHub's anchors:
# lower case, punctuation dropped, spaces to hyphens, -1, -2 for repeats).
# Run from anywhere: docs/check-links.sh. Exits 1 and lists what is broken.
set -euo pipefail
cd "$(dirname "$0")/.."

# anchors FILE: the anchors of FILE's headings, one a line (code blocks skipped).
anchors() {
	awk '
		/^```/ { fence = !fence; next }
		fence || !/^#+ / { next }
		{
			h = $0; sub(/^#+ +/, "", h); h = tolower(h)
			gsub(/[^a-z0-9 _-]/, "", h); gsub(/ /, "-", h)
			n = seen[h]++; print (n ? h "-" n : h)
		}' "$1"
}

broken=0
while IFS= read -r file; do
	dir=$(dirname "$file")
	# Links outside code blocks: ](target), without the title part.
	links=$(awk '/^```/ { fence = !fence; next } !fence' "$file" |
		grep -o '](\([^)( ]*\))' | sed 's/^](//; s/)$//' || true)
	for link in $links; do
		case "$link" in http://* | https://* | mailto:*) continue ;; esac
		path=${link%%#*}
		anchor=
		[[ $link == *#* ]] && anchor=${link#*#}
		target=$file
		if [[ -n $path ]]; then
			target=$dir/$path
			if [[ ! -e $target ]]; then
				echo "$file: $link: no such file"
				broken=1
				continue
			fi
		fi
		if [[ -n $anchor && $target == *.md ]] && ! anchors "$target" | grep -qxF "$anchor"; then
			echo "$file: $link: no heading #$anchor in $target"
			broken=1
		fi
	done
done < <(ls README.md CHANGELOG.md; find docs -name '*.md' | sort)
exit $broken
