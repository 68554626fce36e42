#!/usr/bin/env bash
# One H200 at d6075e8 + .dev/dw-short2.patch (TT_DW_SHORT=1: the grouped weight gradients launched
# in tiles of 128 rows at any token count, the misfit unchanged): v6 without and with it, two
# rounds, at 12 x 128, 8 x 256, 2 x 1024, 8 x 512, 1 x 4096 (the lane's shapes past 1024 tokens);
# the weight-gradient tests with it.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
git log --oneline -1 > $L/commit.txt; git status --short >> $L/commit.txt
git apply .dev/dw-short2.patch || exit 1
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 16 --target tiny_llama gpu_tests >/tmp/build.log 2>&1 || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"
TT_DW_SHORT=1 timeout 90 build/tests/gpu_tests --gtest_filter='Fp8Model.WeightGradientsBehind*:Fp8Model.GroupedWeightGradients*:GpuWeightGradients.*' > $L/tests.log 2>&1; echo "tests rc $? $(el) s"; grep -E "^\[  (PASSED|FAILED) |Failure" $L/tests.log | head -8
B="build/tiny_llama bench --device cuda --precisions bf16 --levels v6 --repeats 5"
run() { env $1 timeout 60 $B --batch-sizes $2 --seq-lens $3 > $L/$4.log 2>&1; grep -E '^v6 ' $L/$4.log | awk '{print $5}'; }
for S in "12 128" "8 256" "2 1024" "8 512" "1 4096"; do set -- $S
  for R in 1 2; do
    echo "$1x$2 round $R: tall $(run X=0 $1 $2 tall_$1x$2_$R) short $(run TT_DW_SHORT=1 $1 $2 short_$1x$2_$R) $(el) s"
  done
done
echo "== done $(el) s"
