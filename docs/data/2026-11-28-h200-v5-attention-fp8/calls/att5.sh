#!/usr/bin/env bash
# One more ablation with fp8-fused-attention on (the conflict-free transpose), then GPU tests
# (FP8, attention, the model, kernels --check's tests) for as long as the call allows.
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$(nproc)" --target tiny_llama gpu_tests >/tmp/build.log 2>&1) || { grep -B2 -A10 "error" /tmp/build.log | head -60; exit 1; }
timeout 170 build/tiny_llama ablate --device cuda --version v5 --use-amp --preset gpt2-small --num-steps 20 --enable-fp8-fused-attention --csv $L/ablate_gpt2.csv > $L/ablate_gpt2.log 2>&1; echo "rc $?"; grep -E "^(full|-fp8-fused-att|-custom-att)" $L/ablate_gpt2.log
t=$(( ${LIMIT:-280} - ($(date +%s) - T0) )); echo "tests for $t s"
(cd build && timeout $t ctest -L "^gpu$" -R "Fp8|GpuAttention|GpuKernelCheck|GpuModel" -j 4 --timeout 150 > $L/gpu-tests.log 2>&1); echo "rc $?"
grep -cE "Test +#.*Passed" $L/gpu-tests.log; grep -E "\*\*\*Failed|\(Failed\)|Timeout|tests passed" $L/gpu-tests.log | head
