#!/usr/bin/env bash
# One H200, the working tree (HEAD + the fused backward's dQ sent in the background by warp 0):
# build, the attention tests, memcheck/racecheck/synccheck on a fused run, then gpt2-small v5
# with and without --enable-fused-attention-backward (bench alternating, and a profile each).
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$(nproc)" --target tiny_llama gpu_tests >/tmp/build.log 2>&1) || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader; echo "built $(el) s"
timeout 150 build/tests/gpu_tests --gtest_filter='*GpuAttention*:*GpuOpCase*attention*' > $L/tests.log 2>&1; echo "tests rc $?"
grep -E "^\[ +(OK|FAILED) .*Fused|PASSED|FAILED|Failure|Expected|Which is" $L/tests.log | head -30
small="--batch-size 2 --seq-len 256 --hidden-dim 128 --num-heads 2 --num-layers 1 --num-steps 2 --enable-fused-attention-backward"
for tool in memcheck racecheck synccheck; do
  timeout 120 compute-sanitizer --tool $tool --kernel-name-exclude kns=nvjet build/tiny_llama --device cuda --version v5 --use-amp $small > $L/$tool.log 2>&1; echo "$tool rc $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $L/$tool.log | tail -1)"
done
echo "== bench $(el) s"
for rep in 1 2; do
  for sw in off on; do
    f=""; [ $sw = on ] && f="--enable-fused-attention-backward"
    timeout 90 build/tiny_llama bench --device cuda --levels v5 --precisions bf16 --preset gpt2-small --timing-warmup-steps 5 --steps 10 --repeats 3 $f --json $L/g2_${sw}_$rep.json > $L/g2_${sw}_$rep.log 2>&1
    echo "$sw $rep: $(grep -E '^v5 ' $L/g2_${sw}_$rep.log)"
  done
done
echo "== profile $(el) s"
for sw in off on; do
  f=""; [ $sw = on ] && f="--enable-fused-attention-backward"
  timeout 90 build/tiny_llama --device cuda --version v5 --use-amp --preset gpt2-small --num-steps 9 --timing-warmup-steps 6 --profile-steps 2 --profile $L/profile_$sw $f > $L/profile_$sw.log 2>&1; echo "profile $sw rc $?"
  grep -E "^  [0-9.]+ = |flash_|attention " $L/profile_$sw.log | head -12
done
echo "== done $(el) s"
