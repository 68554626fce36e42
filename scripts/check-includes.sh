#!/usr/bin/env bash
# Every #include in src/ points down the layers, never up (CI runs this):
#   core -> data, plan, trace -> ops -> backend -> parallel -> model -> train -> bench -> cli
# A folder may include its own and those to its left. A folder of src/ missing from the list is
# an error too: a new one is placed in it here. Prints each include that points up; exit 1 if any.
#   bash scripts/check-includes.sh [DIR]      (DIR: the tree to check, default src)
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0" | sed '$d'; exit 0; fi  # the header above
set -uo pipefail
cd "$(dirname "$0")/.."
root=${1:-src}
declare -A rank=([core]=0 [data]=1 [plan]=1 [trace]=1 [ops]=2 [backend]=3 [parallel]=4 [model]=5 [train]=7
                 [bench]=8 [cli]=9)
bad=0
for dir in "$root"/*/; do
  folder=$(basename "$dir")
  [[ -n "${rank[$folder]:-}" ]] || { echo "check-includes: $root/$folder is not in the layer order (scripts/check-includes.sh)"; bad=1; }
done
while IFS=: read -r file _ text; do
  folder=${file#"$root"/}; folder=${folder%%/*}
  target=$(sed -E 's/^#include "([^"]+)".*/\1/' <<<"$text"); to=${target%%/*}
  [[ -n "${rank[$folder]:-}" && -n "${rank[$to]:-}" ]] || continue  # same-folder headers, tests' own
  if (( rank[$to] > rank[$folder] )); then
    echo "check-includes: $file includes $target: $folder may not include $to (it is above it)"
    bad=1
  fi
done < <(grep -rn --include='*.h' --include='*.cpp' --include='*.cu' --include='*.cuh' '^#include "' "$root")
[ $bad -eq 0 ] && echo "check-includes: every include of $root points down the layers"
exit $bad
