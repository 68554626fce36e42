#!/usr/bin/env bash
# One H200 at d6075e8 + the grouped weight gradients in tiles of 128 rows beside the lane from 2048
# tokens (the working tree; .dev/tiles-beside.patch is that change, reversed for the parent build):
# its tests, v6 alternating with the parent at 8 x 128, 8 x 256, 2 x 1024, 8 x 512 (two rounds),
# v5 and v6 in turns at 8 x 256 and 2 x 1024, then the whole GPU suite.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
git log --oneline -1 > $L/commit.txt; git status --short >> $L/commit.txt
git apply -R .dev/tiles-beside.patch || exit 1
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 16 --target tiny_llama >/tmp/build.log 2>&1 || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
cp build/tiny_llama /tmp/parent
git apply .dev/tiles-beside.patch || exit 1
cmake --build build -j 16 >/tmp/build2.log 2>&1 || { grep -B2 -A12 "error" /tmp/build2.log | head -60; exit 1; }
echo "built $(el) s"
timeout 90 build/tests/gpu_tests --gtest_filter='GpuWeightGradients.*:Fp8Model.WeightGradientsBehind*:Fp8Model.GroupedWeightGradients*' > $L/tests.log 2>&1; echo "tests rc $? $(el) s"; grep -E "^\[  (PASSED|FAILED) |Failure" $L/tests.log | head -8
B="bench --device cuda --precisions bf16 --levels v6 --repeats 5"
run() { timeout 60 $1 $B --batch-sizes $2 --seq-lens $3 > $L/$4.log 2>&1; grep -E '^v6 ' $L/$4.log | awk '{print $5}'; }
for S in "8 128" "8 256" "2 1024" "8 512"; do set -- $S
  for R in 1 2; do
    echo "$1x$2 round $R: parent $(run /tmp/parent $1 $2 parent_$1x$2_$R) beside $(run build/tiny_llama $1 $2 beside_$1x$2_$R) $(el) s"
  done
done
for S in "8 256" "2 1024"; do set -- $S
  timeout 90 build/tiny_llama bench --device cuda --precisions bf16 --levels v5,v6 --repeats 3 --batch-sizes $1 --seq-lens $2 > $L/v5v6_$1x$2.log 2>&1; grep -E "holds|BROKEN" $L/v5v6_$1x$2.log
done
(cd build && timeout 250 ctest -L "^gpu$" -j 10 --timeout 240 --output-on-failure > $L/gpu-suite.log 2>&1); echo "suite rc $? $(el) s"; grep -E "tests passed|\(Failed\)|\*\*\*Failed|Timeout" $L/gpu-suite.log | head -20
echo "== done $(el) s"
