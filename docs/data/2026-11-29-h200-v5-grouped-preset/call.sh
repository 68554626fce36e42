#!/usr/bin/env bash
# One H200, the working tree (grouped-weight-gradients preset in v5): build, the whole GPU suite at
# ten at a time, v4 and v5 at the default shape, and the run header's products line.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$(nproc)" --target tiny_llama gpu_tests >/tmp/build.log 2>&1) || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader; echo "built $(el) s"
timeout 15 build/tiny_llama --device cuda --version v5 --use-amp --seq-len 128 --num-steps 3 > $L/header.log 2>&1; grep -E "^Products|^Backend" $L/header.log
timeout 30 build/tiny_llama bench --device cuda --levels v4,v5 --precisions bf16 --repeats 3 --json $L/bench_default.json > $L/bench_default.log 2>&1; grep -E "^v[0-9]|ladder|BROKEN|holds" $L/bench_default.log
(cd build && timeout $(( 270 - $(el) )) ctest -L "^gpu$" -j 10 --timeout 200 --output-on-failure > $L/gpu-tests.log 2>&1); echo "tests rc $? at $(el) s"
grep -E "tests passed|tests failed|Total Test time|\(Failed\)|\(Timeout\)|Not Run" $L/gpu-tests.log | head -20
echo "== done $(el) s"
