#!/usr/bin/env bash
# One H200, the working tree: build, the tests of update-in-weight-gradients and its neighbours,
# the default shape with and without the switch (alternating), a profile with it, then the grouped
# rule's token cap raised to 2048 (a patch here, not committed) and 8 x 256 with and without grouping.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$(nproc)" --target tiny_llama gpu_tests >/tmp/build.log 2>&1) || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader; echo "built $(el) s"; git rev-parse --short HEAD; git status --short | head
timeout 200 build/tests/gpu_tests --gtest_filter='*GpuWeightGradients*:*UpdateInWeightGradients*:*GroupedWeightGradients*:*GpuOps*AdamW*:*WhereFp8DoesNotPay*' > $L/tests.log 2>&1; echo "tests rc $? at $(el) s"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|OK \]" $L/tests.log | head -20; grep -B3 -A10 "Failure" $L/tests.log | head -40
echo "== bench $(el) s"
for rep in 1 2 3; do
  for sw in off on; do
    f=""; [ $sw = on ] && f="--enable-update-in-weight-gradients"
    timeout 60 build/tiny_llama bench --device cuda --levels v5 --precisions bf16 --repeats 3 $f --json $L/default_${sw}_$rep.json > $L/default_${sw}_$rep.log 2>&1
    echo "$sw $rep: $(grep -E '^v5 ' $L/default_${sw}_$rep.log | awk '{print $5, $6}')"
  done
done
timeout 60 build/tiny_llama --device cuda --version v5 --use-amp --num-steps 3 --seq-len 128 --enable-update-in-weight-gradients > $L/header_on.log 2>&1; grep -E "Products|loss" $L/header_on.log | head -5
echo "== profile $(el) s"
for sw in off on; do
  f=""; [ $sw = on ] && f="--enable-update-in-weight-gradients"
  timeout 90 build/tiny_llama --device cuda --version v5 --use-amp --seq-len 128 --num-steps 15 --timing-warmup-steps 10 --profile-steps 3 --profile $L/profile_$sw $f > $L/profile_$sw.log 2>&1; echo "profile $sw rc $?"
  grep -E "^  [0-9.]+ = |grouped_gemm|adamw" $L/profile_$sw.log | head -8
done
echo "== 2048 tokens $(el) s"
sed -i 's/products\[0\].k > 1024/products[0].k > 2048/' src/ops/weight_gradients.cu
cmake --build build -j "$(nproc)" --target tiny_llama >/tmp/build2.log 2>&1 || { tail -20 /tmp/build2.log; exit 1; }
echo "rebuilt $(el) s"
for rep in 1 2; do
  for sw in apart grouped; do
    f="--disable-grouped-weight-gradients"; [ $sw = grouped ] && f=""
    timeout 60 build/tiny_llama bench --device cuda --levels v5 --precisions bf16 --repeats 3 --seq-lens 256 $f --json $L/t256_${sw}_$rep.json > $L/t256_${sw}_$rep.log 2>&1
    echo "$sw $rep: $(grep -E '^v5 ' $L/t256_${sw}_$rep.log | awk '{print $5, $6}')"
  done
done
sed -i "s/products\[0\].k > 2048/products[0].k > 1024/" src/ops/weight_gradients.cu
echo "== done $(el) s"
