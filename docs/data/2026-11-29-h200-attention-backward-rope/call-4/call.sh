#!/usr/bin/env bash
# One H200 (GPU 0 of two): the one-block backward with RoPE's backward inside, its table's reads
# ahead of the stores. Its tests, sanitizers, the v5 step with and without the switch in one job,
# the kernel's time in a profile.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 32 --target tiny_llama gpu_tests >/tmp/build.log 2>&1) || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"; grep -c C75 /tmp/build.log
timeout 120 build/tests/gpu_tests --gtest_filter='*GpuAttention*:*AttentionBackwardInOneBlock*:*WhereFp8DoesNotPay*' > $L/attention-tests.log 2>&1; echo "tests rc $?"; grep -E "^\[  (PASSED|FAILED) |Failure|FAILED  \]" $L/attention-tests.log | head
for tool in memcheck racecheck; do
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 3 build/tiny_llama --device cuda --version v5 --use-amp --enable-attention-backward-in-one-block --num-steps 2 --batch-size 2 --seq-len 128 --hidden-dim 128 --num-heads 2 --num-layers 2 --log-every 1 > $L/san_${tool}_T128.log 2>&1
  echo "$tool rc $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $L/san_${tool}_T128.log | tail -1)"
done
for rep in 1 2 3; do
  timeout 40 build/tiny_llama bench --device cuda --levels v5 --precisions bf16 --repeats 3 --json $L/T128_two_$rep.json > $L/T128_two_$rep.log 2>&1
  timeout 40 build/tiny_llama bench --device cuda --levels v5 --precisions bf16 --repeats 3 --enable-attention-backward-in-one-block --json $L/T128_one_$rep.json > $L/T128_one_$rep.log 2>&1
  echo "T128 $rep: two $(grep -E '^v5 ' $L/T128_two_$rep.log | awk '{print $5, $6}') one $(grep -E '^v5 ' $L/T128_one_$rep.log | awk '{print $5, $6}')"
done
timeout 40 build/tiny_llama --device cuda --version v5 --use-amp --enable-attention-backward-in-one-block --seq-len 128 --num-steps 15 --timing-warmup-steps 10 --profile-steps 3 --profile $L/profile_one > $L/profile_one.log 2>&1; echo "profile rc $?"; grep -E "busy" $L/profile_one.log | head -3
grep -E "flash_backward|rope_kernel" $L/profile_one/kernels.csv
echo "== done $(el) s"
