#!/usr/bin/env bash
# One H200 at the tree (bfe752d plus the review's mends): the memory test's new failure messages
# and comment, with the tests of the two changed files that f037f7a touched.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
git log --oneline -1 > $L/commit.txt; git status --short >> $L/commit.txt
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 16 --target gpu_tests >/tmp/build.log 2>&1 || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"
timeout 120 build/tests/gpu_tests --gtest_filter='*GpuAttention*:GpuMemory.*' > $L/changed-tests.log 2>&1; echo "changed tests rc $? $(el) s"; grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED  \]|^\[       OK" $L/changed-tests.log | head
echo "== done $(el) s"
