#!/usr/bin/env bash
# One H200, the working tree: the gated product with tiles of 64 or 128 columns of gate and up
# (TT_GATED_HALF, an experiment): its tests both ways, registers, and v5 at 8 x 128 and 8 x 256
# without the switch, with 64 and with 128 (alternating).
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$(nproc)" --target tiny_llama gpu_tests >/tmp/build.log 2>&1) || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader; echo "built $(el) s"
cuobjdump -res-usage build/CMakeFiles/tt.dir/src/ops/gated_product.cu.o 2>&1 | grep -A1 -E "Function.*gated" | grep -oE "REG:[0-9]+|STACK:[0-9]+|SHARED:[0-9]+|LOCAL:[0-9]+" | paste -sd' '
for hf in 64 128; do
  TT_GATED_HALF=$hf timeout 200 build/tests/gpu_tests --gtest_filter='*GpuGatedProduct*:*SwigluInGateUp*' > $L/tests_$hf.log 2>&1; echo "tests $hf rc $? at $(el) s"
  grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|OK \]" $L/tests_$hf.log | head; grep -B3 -A12 "Failure" $L/tests_$hf.log | head -30
done
TT_GATED_HALF=128 timeout 120 compute-sanitizer --tool memcheck build/tests/gpu_tests --gtest_filter='*GpuGatedProduct*' > $L/memcheck_128.log 2>&1; echo "memcheck rc $?"; grep -E "ERROR SUMMARY" $L/memcheck_128.log
echo "== bench $(el) s"
for T in 128 256; do
  for rep in 1 2; do
    for sw in off 64 128; do
      f=""; [ $sw != off ] && f="--enable-swiglu-in-gate-up"
      TT_GATED_HALF=$sw timeout 60 build/tiny_llama bench --device cuda --levels v5 --precisions bf16 --repeats 3 --seq-lens $T $f --json $L/T${T}_${sw}_$rep.json > $L/T${T}_${sw}_$rep.log 2>&1
      echo "T $T $sw $rep: $(grep -E '^v5 ' $L/T${T}_${sw}_$rep.log | awk '{print $5, $6}')"
    done
  done
done
echo "== profile $(el) s"
for sw in 64 128; do
  TT_GATED_HALF=$sw timeout 90 build/tiny_llama --device cuda --version v5 --use-amp --seq-len 128 --num-steps 15 --timing-warmup-steps 10 --profile-steps 3 --profile $L/profile_$sw --enable-swiglu-in-gate-up > $L/profile_$sw.log 2>&1; echo "profile $sw rc $?"
  grep -E "^  [0-9.]+ = " $L/profile_$sw.log | head -3; grep -E "gated" $L/profile_$sw/kernels.csv
done
echo "== done $(el) s"
