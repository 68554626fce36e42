#!/usr/bin/env bash
# One H200, the working tree (HEAD + grouped-weight-gradients): build, the new tests and memcheck,
# then v5 at the default shape with and without the switch, alternating, and a profile with it.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$(nproc)" --target tiny_llama gpu_tests >/tmp/build.log 2>&1) || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader; echo "built $(el) s"
timeout 200 build/tests/gpu_tests --gtest_filter='GpuWeightGradients.*:Fp8Model.GroupedWeightGradientsChangeNoBit:Fp8Model.WhereFp8DoesNotPay*:Fp8Model.TimedProductsChangeNoBit' > $L/tests.log 2>&1; echo "tests rc $?"
grep -E "^\[ +(OK|FAILED) |PASSED|FAILED|Failure|Expected|Which is|product" $L/tests.log | head -30
timeout 120 compute-sanitizer --tool memcheck build/tests/gpu_tests --gtest_filter='GpuWeightGradients.*' > $L/memcheck.log 2>&1; echo "memcheck rc $?"; grep -E "ERROR SUMMARY|PASSED|FAILED" $L/memcheck.log | head -3
echo "== bench $(el) s"
for rep in 1 2 3; do
  for sw in off on; do
    f=""; [ $sw = on ] && f="--enable-grouped-weight-gradients"
    timeout 60 build/tiny_llama bench --device cuda --levels v5 --precisions bf16 --repeats 3 $f --json $L/default_${sw}_$rep.json > $L/default_${sw}_$rep.log 2>&1
    echo "$sw $rep: $(grep -E '^v5 ' $L/default_${sw}_$rep.log | awk '{print $5, $6}')"
  done
done
echo "== profile $(el) s"
for sw in off on; do
  f=""; [ $sw = on ] && f="--enable-grouped-weight-gradients"
  timeout 90 build/tiny_llama --device cuda --version v5 --use-amp --num-steps 15 --timing-warmup-steps 10 --profile-steps 3 --profile $L/profile_$sw $f > $L/profile_$sw.log 2>&1; echo "profile $sw rc $?"
  grep -E "Kernel launches|^  [0-9.]+ = |grouped_gemm|nvjet" $L/profile_$sw.log | head -12
done
echo "== done $(el) s"
