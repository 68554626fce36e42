#!/usr/bin/env bash
# One H200: the attention's one-block backward with each sequence's two query tiles in two blocks
# (TT_ATT_HALVES=1: clusters of the group's heads x 2, dK and dV summed over all four), dK and dV's
# fp32 parts over the tiles (both forms). Tests under both, how many clusters fit, then the step.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
git log --oneline -1 > $L/commit.txt; git status --short >> $L/commit.txt; git diff > $L/halves.patch
nvcc -arch=sm_90a -o /tmp/cp .dev/cluster_probe.cu && /tmp/cp > $L/clusters.log 2>&1; cat $L/clusters.log
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 16 --target tiny_llama gpu_tests >/tmp/build.log 2>&1 || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"
F='*OneBlockBackward*:Fp8Model.Version6Tracks*:Fp8Model.WeightGradientsBehind*'
timeout 120 build/tests/gpu_tests --gtest_filter="$F" > $L/tests_now.log 2>&1; echo "now rc $?"; grep -E "^\[  (PASSED|FAILED) |Failure" $L/tests_now.log | head -5
TT_ATT_HALVES=1 timeout 120 build/tests/gpu_tests --gtest_filter="$F" > $L/tests_halves.log 2>&1; echo "halves rc $? $(el) s"; grep -E "^\[  (PASSED|FAILED) |Failure|actual|Which" $L/tests_halves.log | head -8
B="build/tiny_llama bench --device cuda --precisions bf16 --levels v6 --repeats 5 --seq-lens 128"
for N in 8 4; do
  for R in 1 2; do
    timeout 60 $B --batch-sizes $N > $L/now_${N}_$R.log 2>&1
    TT_ATT_HALVES=1 timeout 60 $B --batch-sizes $N > $L/halves_${N}_$R.log 2>&1
    echo "${N}x128 round $R: now $(grep -E '^v6 ' $L/now_${N}_$R.log | awk '{print $5}') halves $(grep -E '^v6 ' $L/halves_${N}_$R.log | awk '{print $5}') $(el) s"
  done
done
for V in now halves; do
  [ $V = halves ] && export TT_ATT_HALVES=1
  timeout 60 build/tiny_llama --device cuda --use-amp --timing-warmup-steps 10 --profile-steps 3 --version v6 --seq-len 128 --num-steps 15 --profile $L/prof_$V > $L/prof_$V.log 2>&1
  echo "$V: $(grep -E 'busy' $L/prof_$V.log | head -1) | $(grep flash_backward_one_block $L/prof_$V.log | head -1)"
  gzip $L/prof_$V/trace.json
done
echo "== done $(el) s"
