#!/usr/bin/env bash
# One H200 at dd45335 + a prototype (the working tree): TT_GROUP_LATE, a layer's grouped weight
# gradients launched on their lane not at the end of its backward but after the layer below's
# SwiGLU backward (1) or after its down input gradient (2), and the layer's update after them.
# Bits against the tree's v6; the v6 step at 8 x 128 and 8 x 256 in turns; profiles at 8 x 128.
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
set_late() { if [ $1 = 0 ]; then unset TT_GROUP_LATE; else export TT_GROUP_LATE=$1; fi; }
for g in 0 1 2; do set_late $g
  timeout 60 build/tiny_llama --device cuda --version v6 --use-amp --seq-len 128 --num-steps 20 --json $L/train-$g.json > $L/train-$g.log 2>&1; echo "train $g rc $?"
done; unset TT_GROUP_LATE
python3 -c "
import json,sys
l=[[s['loss'] for s in json.load(open('$L/train-%d.json'%g))['steps']] for g in (0,1,2)]
print('losses equal:', l[0]==l[1], l[0]==l[2], l[0][-1])"
for r in 1 2 3; do for g in 0 1 2; do set_late $g
  timeout 60 build/tiny_llama bench --device cuda --levels v6 --precisions bf16 --batch-sizes 8 --seq-lens 128 --repeats 3 > $L/bench-128-$g-$r.log 2>&1
  echo "round $r 8x128 late $g: $(grep -E '^v6 ' $L/bench-128-$g-$r.log | awk '{print $5, $6}')"
done; done
for r in 1 2; do for g in 0 1 2; do set_late $g
  timeout 60 build/tiny_llama bench --device cuda --levels v6 --precisions bf16 --batch-sizes 8 --seq-lens 256 --repeats 3 > $L/bench-256-$g-$r.log 2>&1
  echo "round $r 8x256 late $g: $(grep -E '^v6 ' $L/bench-256-$g-$r.log | awk '{print $5, $6}')"
done; done
for g in 0 1 2; do set_late $g
  timeout 90 build/tiny_llama --device cuda --version v6 --use-amp --seq-len 128 --num-steps 15 --timing-warmup-steps 10 --profile-steps 3 --profile /tmp/prof-$g > $L/profile-$g.log 2>&1; echo "profile $g rc $?"; grep -E "busy|optimizer alone" $L/profile-$g.log | head -4
  python3 scripts/profile/chain.py /tmp/prof-$g/trace.json --beside weight_gradients > $L/chain-$g.txt 2>&1; head -16 $L/chain-$g.txt
  cp /tmp/prof-$g/kernels.csv $L/kernels-$g.csv 2>/dev/null
done
echo "== done $(el) s"
