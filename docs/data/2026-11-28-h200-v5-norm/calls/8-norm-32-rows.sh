#!/usr/bin/env bash
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1; cmake --build build -j "$(nproc)" --target tiny_llama gpu_tests >/tmp/build.log 2>&1 || { grep -B2 -A10 "error" /tmp/build.log | head -40; exit 1; }
(cd build && timeout 100 ctest -R "Fp8Quantize.Norm|FusedNorm|GpuKernelCheck" -j 4 --timeout 90 --output-on-failure > /tmp/t.log 2>&1); echo "tests rc $?"; grep -E "tests passed|Failure|Which is|differ" /tmp/t.log | head
for f in "" "--disable-fp8-fused-norm"; do
timeout 60 build/tiny_llama --device cuda --version v5 --use-amp --preset gpt2-small --num-steps 9 --timing-warmup-steps 6 \
    --profile-steps 2 --log-every 100 --profile /tmp/prof $f > /tmp/p.log 2>&1; echo "rc $? $f"
grep -E "measured|rmsnorm|  RMSNorm|  quantizing" /tmp/p.log | head -6
done
