#!/usr/bin/env bash
# One H200, the working tree (HEAD 2667afc + .dev/adamw-grid.patch: AdamW's grid capped by TT_ADAMW_BLOCKS,
# each thread stepping by the grid): steps at the default shape (v4 and v5), gpt2-small and medium (v5)
# for several caps, alternating; the training bits with and without a cap.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$(nproc)" --target tiny_llama >/tmp/build.log 2>&1) || { tail -30 /tmp/build.log; exit 1; }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader; echo "built $(el) s"
B=build/tiny_llama
for rep in 1 2; do
  for cap in 0 16 32 66 132 264 528; do
    TT_ADAMW_BLOCKS=$cap timeout 60 $B bench --device cuda --levels v4,v5 --precisions bf16 --repeats 3 --json $L/default_${cap}_$rep.json > $L/default_${cap}_$rep.log 2>&1
    echo "default cap $cap rep $rep: $(grep -E '^v[45] ' $L/default_${cap}_$rep.log | awk '{print $1, $5, $6}' | tr '\n' ' ')"
  done
done
echo "== bits $(el) s"
for cap in 0 32; do
  TT_ADAMW_BLOCKS=$cap timeout 60 $B --device cuda --version v4 --use-amp --num-steps 20 --log-every 1 --json $L/bits_v4_$cap.json > $L/bits_v4_$cap.log 2>&1
  TT_ADAMW_BLOCKS=$cap timeout 60 $B --device cuda --version v5 --use-amp --preset gpt2-small --num-steps 6 --log-every 1 --grad-clip 1000 --json $L/bits_v5_$cap.json > $L/bits_v5_$cap.log 2>&1
done
python3 - $L <<'PY'
import json, sys
d = sys.argv[1]
for v in ("v4", "v5"):
    a, b = (json.load(open(f"{d}/bits_{v}_{c}.json")) for c in (0, 32))
    la = [s["loss"] for s in a["steps"]] if "steps" in a else a
    lb = [s["loss"] for s in b["steps"]] if "steps" in b else b
    print(v, "losses the same:", la == lb, la[-1] if la else None)
PY
for rep in 1 2; do
  for p in gpt2-small medium; do
    for cap in 0 132 264; do
      TT_ADAMW_BLOCKS=$cap timeout 60 $B bench --device cuda --levels v5 --precisions bf16 --timing-warmup-steps 5 --steps 10 --repeats 3 --preset $p --json $L/${p}_${cap}_$rep.json > $L/${p}_${cap}_$rep.log 2>&1
      echo "$p cap $cap rep $rep: $(grep -E '^v5 ' $L/${p}_${cap}_$rep.log | awk '{print $5, $6}')"
    done
  done
done
echo "== done $(el) s"
