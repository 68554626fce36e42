#!/usr/bin/env bash
# fp8-fused-attention with the transpose's reads free of bank conflicts: its test, the kernel's
# time against v3's at gpt2-small's shape, an ablation.
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$(nproc)" --target tiny_llama gpu_tests >/tmp/build.log 2>&1) || { grep -B2 -A10 "error" /tmp/build.log | head -60; exit 1; }
timeout 120 build/tests/gpu_tests --gtest_filter='*Fp8Quantize.Attention*:Fp8Model.FusedAttention*' > $L/gpu-tests.log 2>&1; echo "tests rc $?"; grep -E "^\[  (PASSED|FAILED) |Failure" $L/gpu-tests.log | head
timeout 90 build/tiny_llama kernels --ops attention --levels v2,v3,v5 --batch-size 16 --seq-len 1024 --num-heads 12 --num-kv-heads 12 --hidden-dim 768 --seq-lens 1024 --long-batch 16 > $L/kernels_attention_T1024.log 2>&1; grep -E "^attention +fwd " $L/kernels_attention_T1024.log | awk '!seen[$4]++'
timeout 170 build/tiny_llama ablate --device cuda --version v5 --use-amp --preset gpt2-small --num-steps 20 --enable-fp8-fused-attention --csv $L/ablate_gpt2.csv > $L/ablate_gpt2.log 2>&1; echo "rc $?"; grep -E "^(full|-fp8-fused|-custom-att)" $L/ablate_gpt2.log
