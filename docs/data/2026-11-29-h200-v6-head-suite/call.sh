#!/usr/bin/env bash
# One H200: the whole GPU suite at HEAD.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 32 >/tmp/build.log 2>&1) || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"
(cd build && timeout 330 ctest -L "^gpu$" -j 10 --timeout 250 > $L/gpu-suite.log 2>&1); echo "suite rc $? $(el) s"; grep -E "tests passed|Failed  |\(Failed\)|Timeout" $L/gpu-suite.log | head -20
grep -E "qkv_rope|GpuModel.*v[56]_bf16|EveryRowMatches" $L/gpu-suite.log | head -12
echo "== done $(el) s"
