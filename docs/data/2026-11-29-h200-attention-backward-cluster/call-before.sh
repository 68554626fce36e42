#!/usr/bin/env bash
# One H200: attention-backward-in-one-block as a block per (sequence, query head), a cluster per
# kv head's group. Its tests, sanitizers through it (T 100 and 128), the step with and without it
# in one job, and the two profiles.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$(nproc)" >/tmp/build.log 2>&1) || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"
timeout 200 build/tests/gpu_tests --gtest_filter='*GpuAttention*:*AttentionBackwardInOneBlock*' > $L/tests.log 2>&1; echo "tests rc $?"; grep -E "^\[  (PASSED|FAILED) |FAILED|Failure|Expected|Which is|actual|error|max" $L/tests.log | head -30
for T in 100 128; do for tool in memcheck racecheck; do
  timeout 120 compute-sanitizer --tool $tool --error-exitcode 3 build/tiny_llama --device cuda --version v5 --use-amp --enable-attention-backward-in-one-block --num-steps 2 --batch-size 2 --seq-len $T --hidden-dim 128 --num-heads 2 --num-layers 2 --log-every 1 > $L/san_${tool}_T$T.log 2>&1
  echo "T$T $tool rc $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $L/san_${tool}_T$T.log | tail -1)"
done; done
echo "== $(el) s"
for rep in 1 2; do
  timeout 90 build/tiny_llama bench --device cuda --levels v5 --precisions bf16 --repeats 3 --json $L/T128_two_$rep.json > $L/T128_two_$rep.log 2>&1
  timeout 90 build/tiny_llama bench --device cuda --levels v5 --precisions bf16 --repeats 3 --enable-attention-backward-in-one-block --json $L/T128_one_$rep.json > $L/T128_one_$rep.log 2>&1
  echo "T128 $rep: two $(grep -E '^v5 ' $L/T128_two_$rep.log | awk '{print $5, $6}') one $(grep -E '^v5 ' $L/T128_one_$rep.log | awk '{print $5, $6}')"
done
for k in two one; do
  sw=; [ $k = one ] && sw=--enable-attention-backward-in-one-block
  timeout 90 build/tiny_llama --device cuda --version v5 --use-amp $sw --seq-len 128 --num-steps 15 --timing-warmup-steps 10 --profile-steps 3 --profile $L/profile_$k > $L/profile_$k.log 2>&1; echo "profile $k rc $?"; grep -E "Attention|busy" $L/profile_$k.log | head -3
  grep -E "flash_backward|rope_kernel" $L/profile_$k/kernels.csv
done
echo "== done $(el) s"
