#!/usr/bin/env bash
# Two H200s (GPU 0 for the one-GPU parts): version 6 (the one-block attention backward as its
# preset). The whole GPU suite, then the two-GPU multigpu tests (v6 among the versions).
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 32 >/tmp/build.log 2>&1) || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"; git rev-parse --short HEAD; git status --short | head -20
export CUDA_VISIBLE_DEVICES=0
timeout 100 build/tests/gpu_tests --gtest_filter='Fp8Model.Version6*:Fp8Model.RopeInQkv*:*GpuRopeProduct*:*v6_bf16*:*v5_bf16*:*GpuProfile*/5:*GpuProfile*/4' > $L/v6-tests.log 2>&1; echo "v6 tests rc $? $(el) s"; grep -E "^\[  (PASSED|FAILED) |Failure|FAILED  \]" $L/v6-tests.log | head
timeout 260 ctest --test-dir build -L "^gpu$" -j 10 --timeout 220 > $L/gpu-suite.log 2>&1; echo "gpu suite rc $? $(el) s"; grep -E "tests passed|tests failed|\*\*\*Failed|Timeout|Not Run" $L/gpu-suite.log | head -20
unset CUDA_VISIBLE_DEVICES
timeout 170 ctest --test-dir build -L multigpu -j 1 --timeout 160 > $L/multigpu.log 2>&1; echo "multigpu rc $? $(el) s"; grep -E "tests passed|tests failed|\*\*\*Failed|Timeout|Passed" $L/multigpu.log | head -20
echo "== done $(el) s"
