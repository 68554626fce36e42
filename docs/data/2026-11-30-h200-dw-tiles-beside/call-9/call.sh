#!/usr/bin/env bash
# One H200 at 0949ac4 + the first layer's FFN update ahead with the weight-gradient lane between the
# two priorities (the working tree; .dev/ahead-final.patch is that change, reversed for the parent
# build): the bit tests, v6 alternating with the parent at 8 x 128 (two rounds), 8 x 256 (one).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
git log --oneline -1 > $L/commit.txt; git status --short >> $L/commit.txt
git apply -R .dev/ahead-final.patch || exit 1
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 16 --target tiny_llama >/tmp/build.log 2>&1 || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
cp build/tiny_llama /tmp/parent
git apply .dev/ahead-final.patch || exit 1
cmake --build build -j 16 --target tiny_llama gpu_tests >/tmp/build2.log 2>&1 || { grep -B2 -A12 "error" /tmp/build2.log | head -60; exit 1; }
echo "built $(el) s"
timeout 60 build/tests/gpu_tests --gtest_filter='Fp8Model.WeightGradientsBehind*:Fp8Model.GroupedWeightGradients*:Fp8Model.Version6Tracks*:*GpuModel.*v6*' > $L/tests.log 2>&1; echo "tests rc $? $(el) s"; grep -E "^\[  (PASSED|FAILED) |Failure" $L/tests.log | head -4
B="bench --device cuda --precisions bf16 --levels v6 --repeats 5"
run() { timeout 40 $1 $B --batch-sizes $2 --seq-lens $3 > $L/$4.log 2>&1; grep -E '^v6 ' $L/$4.log | awk '{print $5}'; }
for S in "8 128 2" "8 256 1"; do set -- $S
  for R in $(seq 1 $3); do
    echo "$1x$2 round $R: parent $(run /tmp/parent $1 $2 parent_$1x$2_$R) ahead $(run build/tiny_llama $1 $2 ahead_$1x$2_$R) $(el) s"
  done
done
echo "== done $(el) s"
