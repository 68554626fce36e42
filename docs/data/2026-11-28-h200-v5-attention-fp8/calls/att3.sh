#!/usr/bin/env bash
# Our flash attention against cuDNN's (v2) and v5's with the FP8 output, over sequence lengths at
# 16384 tokens (gpt2-small's heads); the changed tests and kernels --check's attention rows.
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$(nproc)" --target tiny_llama gpu_tests >/tmp/build.log 2>&1) || { grep -B2 -A10 "error" /tmp/build.log | head -60; exit 1; }
timeout 120 build/tests/gpu_tests --gtest_filter='*Fp8Quantize.Attention*:Fp8Model.Fused*' > $L/gpu-tests.log 2>&1; echo "tests rc $?"; grep -E "^\[  (PASSED|FAILED) |Failure" $L/gpu-tests.log | head
timeout 150 build/tiny_llama kernels --check --ops attention > $L/kernels_check_attention.log 2>&1; echo "check rc $?"; tail -3 $L/kernels_check_attention.log
for bt in 128:128 64:256 32:512 16:1024 8:2048; do
  B=${bt%%:*}; T=${bt#*:}
  timeout 90 build/tiny_llama kernels --ops attention --levels v2,v3,v5 --batch-size $B --seq-len $T --num-heads 12 --num-kv-heads 12 --hidden-dim 768 --seq-lens $T --long-batch $B --json $L/kernels_attention_T$T.json > $L/kernels_attention_T$T.log 2>&1 || echo "rc $? at T $T"
  echo "-- B$B T$T"; grep -E "^attention" $L/kernels_attention_T$T.log | head -8
done
