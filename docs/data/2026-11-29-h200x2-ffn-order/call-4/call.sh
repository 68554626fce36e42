#!/usr/bin/env bash
# One H200, a clean tree at 09a69d1 (the ffn's input gradients before its weight gradients; Down's
# FP8 gradient transpose in a buffer of its own): the GPU tests of every plan's gradients against
# the CPU and of FP8 (ctest -R "Fp8Model|Plans/GpuModel"), v4/v5 at gpt2-small, then the v6
# prototype's next call (.dev/next-v6.sh).
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$(nproc)" >/tmp/build.log 2>&1) || { tail -30 /tmp/build.log; exit 1; }
echo "built $(el) s; $(git log --oneline -1 2>/dev/null)"
timeout 100 build/tiny_llama bench --device cuda --levels v4,v5 --precisions bf16 --timing-warmup-steps 5 --steps 10 --repeats 3 --preset gpt2-small --json $L/bench_gpt2.json > $L/bench_gpt2.log 2>&1; grep -E "^v[0-9]" $L/bench_gpt2.log
echo "== tests $(el) s"
(cd build && timeout 330 ctest -L "^gpu$" -R "Fp8Model|Plans/GpuModel" -j 4 --output-on-failure > $L/gpu-tests.log 2>&1)
grep -E "tests passed|tests failed|Total Test" $L/gpu-tests.log; grep -E "\*\*\*Failed|Failure|Expected|Which is|Not Run|Timeout" $L/gpu-tests.log | head -20
echo "== v6 $(el) s"
OUT=$OUT/v6 timeout 120 bash .dev/next-v6.sh; mkdir -p $L/v6 && mv $OUT/v6/logs.tgz $L/v6/ 2>/dev/null
echo "== done $(el) s"
