#!/usr/bin/env bash
# The docs check of CI: every relative link and image in README.md and docs/*.md resolves (a
# file or folder of the repository; #anchors are not checked), every measurement folder of
# docs/data has its README and a row in docs/data/README.md, and every command of the
# workshop's CPU path runs. Those commands are the lines starting with "$ " in the code blocks
# that follow a line "<!-- cpu-runnable -->" in docs/workshop.md; each runs from the repository
# root, in order, and must exit with 0.
#   scripts/check-docs.sh            both checks (the commands need build/tiny_llama)
#   scripts/check-docs.sh --links    the links and the folders only
set -uo pipefail
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0" | sed '$d'; exit 0; fi
cd "$(dirname "$0")/.."
failures=0

files=(README.md $(find docs -name '*.md' -not -path 'docs/data/*' | sort))
links=0
for f in "${files[@]}"; do
  dir=$(dirname "$f")
  # ](target) of links and images, without a title or an #anchor.
  while IFS= read -r target; do
    target=${target%% *}
    target=${target%%#*}
    case "$target" in ''|http://*|https://*|mailto:*) continue ;; esac
    links=$((links + 1))
    if [ ! -e "$dir/$target" ]; then
      echo "broken link in $f: $target"
      failures=$((failures + 1))
    fi
  done < <(grep -o '\](\([^)]*\))' "$f" | sed 's/^](//; s/)$//')
done
echo "docs: $links relative links in ${#files[@]} files checked"
# Every measurement folder keeps its provenance: a README of its own and a row in docs/data's.
folders=0
for d in docs/data/*/; do
  d=${d%/}; name=${d#docs/data/}
  folders=$((folders + 1))
  [ -f "$d/README.md" ] || { echo "measurement folder without a README: $d"; failures=$((failures + 1)); }
  grep -qF "[$name]($name/README.md)" docs/data/README.md ||
    { echo "measurement folder without a row in docs/data/README.md: $name"; failures=$((failures + 1)); }
done
echo "docs: $folders measurement folders checked"
[ "${1:-}" = --links ] && { [ $failures -eq 0 ]; exit; }

commands=0
if [ -f docs/workshop.md ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  awk '/<!-- cpu-runnable -->/ {armed = 1; next}
       armed && /^```/ {inside = !inside; if (!inside) armed = 0; next}
       inside && /^\$ / {print substr($0, 3)}' docs/workshop.md > "$tmp/commands"
  while IFS= read -r cmd; do
    commands=$((commands + 1))
    if ! (bash -c "$cmd" >"$tmp/out" 2>&1); then
      echo "workshop command failed: $cmd"
      tail -5 "$tmp/out"
      failures=$((failures + 1))
    fi
  done < "$tmp/commands"
fi
echo "docs: $commands workshop commands run"
if [ $failures -gt 0 ]; then
  echo "docs check: $failures failure(s)"
  exit 1
fi
