#!/usr/bin/env bash
# Call 7 (one GPU): where gpt2-small's ~104 memsets a step come from (v4 and v5 profiles, the
# trace's memset records by region, stream and size, and the kernel before each on its stream).
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
N=$(nproc); T0=$(date +%s)
L=$OUT/logs; mkdir -p $L
trap 'rm -f $L/*/trace.json; tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$N" --target tiny_llama >/tmp/build.log 2>&1) || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
echo "built $(( $(date +%s) - T0 )) s"
for v in v4 v5; do
  timeout 100 build/tiny_llama --device cuda --use-amp --version $v --preset gpt2-small --num-steps 5 --timing-warmup-steps 3 --profile-steps 1 --log-every 100 --profile $L/prof_$v > $L/profile_$v.log 2>&1 || tail -3 $L/profile_$v.log
  python3 - $L/prof_$v/trace.json > $L/memsets_$v.txt <<'PY'
import json, sys, collections
ev = json.load(open(sys.argv[1]))
ev = ev["traceEvents"] if isinstance(ev, dict) else ev
recs = sorted([e for e in ev if e.get("ph") == "X" and e.get("cat") in ("kernel", "memset", "memcpy")], key=lambda e: e["ts"])
last = {}
count = collections.Counter()
for e in recs:
    a = e.get("args", {})
    s = a.get("stream")
    if e["cat"] == "memset":
        count[(a.get("region"), a.get("bytes"), s, last.get(s, "-")[:60])] += 1
    else:
        last[s] = e["name"]
for k, n in sorted(count.items(), key=lambda x: -x[1]):
    print(n, k)
print("total", sum(count.values()))
PY
  echo "== $v"; head -25 $L/memsets_$v.txt
done
echo "== done $(( $(date +%s) - T0 )) s"
