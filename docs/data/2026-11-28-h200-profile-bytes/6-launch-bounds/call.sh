#!/usr/bin/env bash
# One H200: the quantizing kernel held to 8 blocks an SM, against HEAD built beside it: the FP8 and
# GpuProfile tests on the new build, the kernels bench of the FP8 producers alternately, a v5 profile each.
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
N=$(nproc); T0=$(date +%s)
L=$OUT/logs; mkdir -p $L
trap 'rm -f $L/*/trace.json; tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$N" --target tiny_llama gpu_tests >/tmp/build.log 2>&1) || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
(cmake -S .dev/base -B /tmp/base -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg2.log 2>&1 && cmake --build /tmp/base -j "$N" --target tiny_llama >/tmp/build2.log 2>&1) || { tail -30 /tmp/build2.log; exit 1; }
echo "built $(( $(date +%s) - T0 )) s"
G="--precision bf16 --batch-size 16 --seq-len 1024 --hidden-dim 768 --num-heads 12 --num-kv-heads 12 --intermediate-size 2048 --vocab-size 50257 --seq-lens 1024 --long-batch 16"
for who in base new; do
  B=build/tiny_llama; [ $who = base ] && B=/tmp/base/tiny_llama
  timeout 60 $B kernels --levels v5 $G --ops swiglu,quantize,cross_entropy,rope --repeats 5 > $L/kernels_$who.log 2>&1
  echo "== $who"; grep -E "^(swiglu|quantize|cross|rope)" $L/kernels_$who.log | sort -u | awk '{print $1, $2, $5, $6, $7}'
done
for who in base new; do
  B=build/tiny_llama; [ $who = base ] && B=/tmp/base/tiny_llama
  timeout 60 $B --device cuda --use-amp --version v5 --preset gpt2-small --num-steps 9 --timing-warmup-steps 6 --profile-steps 2 --log-every 100 --profile $L/profile_$who > $L/profile_$who.log 2>&1
  echo "== profile $who"; grep -E "^  (SwiGLU|cross-entropy|RoPE|quantizing)|the rows" $L/profile_$who.log
done
t=$(( 185 - ($(date +%s) - T0) )); echo "left $t s"
[ $t -gt 60 ] && { timeout $(( t - 5 )) build/tests/gpu_tests --gtest_filter='*GpuProfile*:Formats/Fp8Quantize.*:Fp8Model.*' > $L/tests.log 2>&1; echo "tests rc $?"; tail -2 $L/tests.log; grep -E "FAILED|Failure" $L/tests.log | head; }
echo "== done $(( $(date +%s) - T0 )) s"
