#!/usr/bin/env bash
# Device call 1: build, the FP8 tests, the cross-entropy check rows, v4 against v5 at gpt2-small.
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
N=$(nproc)
echo "== build $(date +%T)"
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$N" --target tiny_llama gpu_tests >/tmp/build.log 2>&1) || { tail -30 /tmp/cfg.log /tmp/build.log; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
git log --oneline -1
echo "== kernels --check $(date +%T)"
timeout 90 build/tiny_llama kernels --check --levels v4,v5 > $OUT/kcheck.log 2>&1; echo "rc $?"; grep -E "cross_entropy|rows match|FAIL|differ" $OUT/kcheck.log | head
echo "== bench gpt2-small $(date +%T)"
timeout 150 build/tiny_llama bench --device cuda --levels v4,v5 --precisions bf16 --timing-warmup-steps 5 --steps 10 --repeats 3 --preset gpt2-small --json $OUT/bench_gpt2.json > $OUT/bench_gpt2.log 2>&1; echo "rc $?"; grep -E "^v[0-9]|rror" $OUT/bench_gpt2.log
timeout 100 build/tiny_llama bench --device cuda --levels v5 --precisions bf16 --timing-warmup-steps 5 --steps 10 --repeats 3 --preset gpt2-small --disable-fp8-head > $OUT/bench_gpt2_nohead.log 2>&1; echo "rc $?"; grep -E "^v[0-9]|rror" $OUT/bench_gpt2_nohead.log
echo "== tests $(date +%T)"
timeout 250 build/tests/gpu_tests --gtest_filter='*Fp8*:*GpuOpCase*cross_entropy*' > $OUT/tests.log 2>&1; echo "rc $?"
grep -E "^\[fp8|PASSED|FAILED|Failure|Expected|Which is|actual|rror" $OUT/tests.log | head -60
echo "== done $(date +%T)"
