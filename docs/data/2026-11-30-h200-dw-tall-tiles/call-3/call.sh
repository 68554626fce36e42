#!/usr/bin/env bash
# One H200: the grouped weight gradients (tiles of 256 rows) at larger shapes: the token cap lifted
# (TT_DW_TOKENS) and the two-wave cap (TT_DW_WAVES), bf16 products, alternating.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
git log --oneline -1 > $L/commit.txt; git status --short >> $L/commit.txt; git diff > $L/tree.diff
cmake --build build -j 16 --target tiny_llama >/tmp/build.log 2>&1 || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"
run() {  # name, training's shape args (one word, split), bench's args...
  local n=$1 t=$2; shift 2
  TT_DW_TOKENS=100000 TT_DW_WAVES=8 timeout 60 build/tiny_llama --device cuda --version v6 --use-amp --num-steps 3 $t > $L/header_$n.log 2>&1
  echo "$n header: $(grep -o 'weight gradients[^;]*' $L/header_$n.log | head -1)"
  for R in 1 2; do
    TT_DW_TOKENS=2048 TT_DW_WAVES=2 timeout 120 build/tiny_llama bench --device cuda --levels v6 --precisions bf16 --repeats 3 "$@" > $L/b_${n}_off_$R.log 2>&1
    TT_DW_TOKENS=100000 TT_DW_WAVES=8 timeout 120 build/tiny_llama bench --device cuda --levels v6 --precisions bf16 --repeats 3 "$@" > $L/b_${n}_on_$R.log 2>&1
    echo "$n round $R: off $(grep -E '^v6 ' $L/b_${n}_off_$R.log | awk '{print $5}') on $(grep -E '^v6 ' $L/b_${n}_on_$R.log | awk '{print $5}')  $(el) s"
  done
}
run 16x1024 "--batch-size 16 --seq-len 1024" --batch-sizes 16 --seq-lens 1024
run gpt2-small-bf16 "--preset gpt2-small --disable fp8" --preset gpt2-small --disable fp8
run medium-bf16 "--preset medium --disable fp8" --preset medium --disable fp8
echo "== done $(el) s"
