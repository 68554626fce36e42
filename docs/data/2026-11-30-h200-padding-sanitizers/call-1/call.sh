#!/usr/bin/env bash
# One H200 at the tree (0891a21 plus the test changes): the attention tests now bf16 alone, the memory
# test asserting the grouping, the backward block kernel's padding task under memcheck and racecheck
# (the op case's extra checks: a small model pads the weight gradients' stage 9 -> 10 tasks), and the
# whole GPU suite.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
git log --oneline -1 > $L/commit.txt; git status --short >> $L/commit.txt
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 16 >/tmp/build.log 2>&1 || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"
timeout 120 build/tests/gpu_tests --gtest_filter='*GpuAttention*:GpuMemory.*' > $L/changed-tests.log 2>&1; echo "changed tests rc $? $(el) s"; grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED  \]|tests ran" $L/changed-tests.log | head
F='--gtest_filter=Cases/GpuOpCase.ExtraChecks/block_backward_v6_bf16'
S="compute-sanitizer --error-exitcode 9 --kernel-name kns=block_backward_gemm_kernel"
timeout 150 $S --tool memcheck build/tests/gpu_tests $F > $L/memcheck-padding.log 2>&1; echo "memcheck rc $? $(el) s"; grep -E "ERROR SUMMARY|PASSED|FAILED" $L/memcheck-padding.log | head -4
timeout 200 $S --tool racecheck build/tests/gpu_tests $F > $L/racecheck-padding.log 2>&1; echo "racecheck rc $? $(el) s"; grep -E "RACECHECK SUMMARY|ERROR SUMMARY|PASSED|FAILED" $L/racecheck-padding.log | head -4
(cd build && timeout 280 ctest -L "^gpu$" -j 10 --timeout 240 --output-on-failure > $L/gpu-suite.log 2>&1); echo "suite rc $? $(el) s"; grep -E "tests passed|\(Failed\)|\*\*\*Failed|Skipped|Timeout|Total Test" $L/gpu-suite.log | head -20
echo "== done $(el) s"
