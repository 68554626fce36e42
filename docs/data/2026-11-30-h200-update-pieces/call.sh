#!/usr/bin/env bash
# One H200 at d7a1704 + a prototype (the working tree): each layer's AdamW in pieces, placed at
# points of the layer below's backward (TT_UPDATE_SPLIT fractions at: the layer's completion, before
# gate/up's input gradient, the attention part's start, before QKV's input gradient). Bits against
# the unsplit run; the v6 step at 8 x 128 for each split, taking turns, three rounds.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
git log --oneline -1 > $L/commit.txt; git status --short >> $L/commit.txt; git diff > $L/working-tree.patch
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 16 --target tiny_llama >/tmp/build.log 2>&1 || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"
for s in none 0.3,0.3,0.2,0.2; do
  if [ $s = none ]; then unset TT_UPDATE_SPLIT; else export TT_UPDATE_SPLIT=$s; fi
  timeout 60 build/tiny_llama --device cuda --version v6 --use-amp --seq-len 128 --num-steps 20 --json $L/train-$s.json > $L/train-$s.log 2>&1; echo "train $s rc $?"
done
unset TT_UPDATE_SPLIT
python3 - $L <<'PY'
import json, sys
d = sys.argv[1]
a, b = (json.load(open(f"{d}/train-{s}.json")) for s in ("none", "0.3,0.3,0.2,0.2"))
def losses(j):
    return [(s["loss"], s.get("grad_norm")) for s in j["steps"]]
print("losses equal:", losses(a) == losses(b), str(losses(a))[:120])
PY
for r in 1 2 3; do for s in none 1 0,1 0,0,1 0.5,0,0.5 0,0.5,0.5 0.3,0.3,0.2,0.2; do
  if [ $s = none ]; then unset TT_UPDATE_SPLIT; else export TT_UPDATE_SPLIT=$s; fi
  timeout 60 build/tiny_llama bench --device cuda --levels v6 --precisions bf16 --batch-sizes 8 --seq-lens 128 --repeats 3 > $L/bench-$s-$r.log 2>&1
  echo "round $r split $s: $(grep -E '^v6 ' $L/bench-$s-$r.log | awk '{print $5, $6}')"
done; done
echo "== done $(el) s"
