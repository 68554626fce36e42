#!/usr/bin/env bash
# One H200, the working tree: SwiGLU's backward in the epilogue of down's input gradient
# (swiglu-in-down-gradient, opt-in): its tests, memcheck of the kernel test, v5 at 8 x 128 with
# and without it (alternating), a profile each way.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$(nproc)" --target tiny_llama gpu_tests >/tmp/build.log 2>&1) || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader; echo "built $(el) s"; git rev-parse --short HEAD; git status --short | head -20
timeout 200 build/tests/gpu_tests --gtest_filter='*GpuGatedProduct*:*SwigluIn*:*GpuOps*SwiGlu*:*GpuOps*Swiglu*' > $L/tests.log 2>&1; echo "tests rc $? at $(el) s"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|OK \]" $L/tests.log | head -20; grep -B3 -A12 "Failure" $L/tests.log | head -50
cuobjdump -res-usage build/CMakeFiles/tt.dir/src/ops/gated_product.cu.o 2>&1 | grep -A1 Function | grep -oE "REG:[0-9]+|LOCAL:[0-9]+" | paste -sd" "
timeout 120 compute-sanitizer --tool memcheck build/tests/gpu_tests --gtest_filter='*GpuGatedProduct*' > $L/memcheck.log 2>&1; echo "memcheck rc $?"; grep -E "ERROR SUMMARY" $L/memcheck.log
echo "== bench $(el) s"
for T in 128; do
  for rep in 1 2 3; do
    for sw in off on; do
      f=""; [ $sw = on ] && f="--enable-swiglu-in-down-gradient"
      timeout 60 build/tiny_llama bench --device cuda --levels v5 --precisions bf16 --repeats 3 --seq-lens $T $f --json $L/T${T}_${sw}_$rep.json > $L/T${T}_${sw}_$rep.log 2>&1
      echo "T $T $sw $rep: $(grep -E '^v5 ' $L/T${T}_${sw}_$rep.log | awk '{print $5, $6}')"
    done
  done
done
timeout 60 build/tiny_llama --device cuda --version v5 --use-amp --num-steps 3 --seq-len 128 --enable-swiglu-in-down-gradient > $L/header_on.log 2>&1; grep -E "Products|Final" $L/header_on.log | head -5
echo "== profile $(el) s"
for sw in off on; do
  f=""; [ $sw = on ] && f="--enable-swiglu-in-down-gradient"
  timeout 90 build/tiny_llama --device cuda --version v5 --use-amp --seq-len 128 --num-steps 15 --timing-warmup-steps 10 --profile-steps 3 --profile $L/profile_$sw $f > $L/profile_$sw.log 2>&1; echo "profile $sw rc $?"
  grep -E "^  [0-9.]+ = |gemm_swiglu|swiglu|nvjet" $L/profile_$sw.log | head -10
done
echo "== done $(el) s"
