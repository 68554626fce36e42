#!/usr/bin/env bash
# One H200 at d01b91b: v6 with and without swiglu-in-down-gradient at batch 8, 4 and 2 x 128
# (alternating, two rounds); then .dev/sdg-rule.patch (the switch refused beside the weight
# gradients' lane): its tests and the v6 step.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
git log --oneline -1 > $L/commit.txt; git status --short >> $L/commit.txt
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 16 --target tiny_llama gpu_tests >/tmp/build.log 2>&1 || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"
B="build/tiny_llama bench --device cuda --precisions bf16 --levels v6 --repeats 5 --seq-lens 128"
for N in 8 4 2; do
  for R in 1 2; do
    timeout 30 $B --batch-sizes $N > $L/with_${N}_$R.log 2>&1
    timeout 30 $B --batch-sizes $N --disable swiglu-in-down-gradient > $L/without_${N}_$R.log 2>&1
    echo "${N}x128 round $R: with $(grep -E '^v6 ' $L/with_${N}_$R.log | awk '{print $5}') without $(grep -E '^v6 ' $L/without_${N}_$R.log | awk '{print $5}') $(el) s"
  done
done
git apply .dev/sdg-rule.patch || exit 1
cmake --build build -j 16 --target tiny_llama gpu_tests >/tmp/build2.log 2>&1 || { grep -B2 -A12 "error" /tmp/build2.log | head -60; exit 1; }
echo "rule built $(el) s"
timeout 60 build/tests/gpu_tests --gtest_filter='Fp8Model.WeightGradientsBehind*:Fp8Model.SwigluInDownGradient*' > $L/rule_tests.log 2>&1; echo "rule tests rc $?"; grep -E "^\[  (PASSED|FAILED) |Failure" $L/rule_tests.log | head -5
timeout 30 $B --batch-sizes 8 > $L/rule_8.log 2>&1; echo "rule 8x128 $(grep -E '^v6 ' $L/rule_8.log | awk '{print $5}') $(el) s"
timeout 20 build/tiny_llama --device cuda --version v6 --use-amp --num-steps 2 > $L/rule_header.log 2>&1; grep Products $L/rule_header.log
echo "== done $(el) s"
