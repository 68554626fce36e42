#!/usr/bin/env bash
# One H200: the grouped weight gradients (tiles of 256 rows) past 2048 tokens: TT_DW_TOKENS=8192
# lifts the rule's cap; the step with and without, alternating.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
git log --oneline -1 > $L/commit.txt; git status --short >> $L/commit.txt; git diff > $L/tree.diff
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 16 --target tiny_llama >/tmp/build.log 2>&1 || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"
for BT in "8 512" "1 4096" "8 1024"; do set -- $BT
  TT_DW_TOKENS=8192 timeout 60 build/tiny_llama --device cuda --version v6 --use-amp --batch-size $1 --seq-len $2 --num-steps 3 > $L/header_$1x$2.log 2>&1
  echo "$1x$2 header: $(grep -o 'weight gradients[^;]*' $L/header_$1x$2.log | head -1)"
  for R in 1 2; do
    for C in 2048 8192; do TT_DW_TOKENS=$C timeout 90 build/tiny_llama bench --device cuda --levels v6 --precisions bf16 --repeats 3 --batch-sizes $1 --seq-lens $2 > $L/b_$1x$2_${C}_$R.log 2>&1; done
    echo "$1x$2 round $R: cap 2048 $(grep -E '^v6 ' $L/b_$1x$2_2048_$R.log | awk '{print $5}') cap 8192 $(grep -E '^v6 ' $L/b_$1x$2_8192_$R.log | awk '{print $5}')  $(el) s"
  done
done
echo "== done $(el) s"
