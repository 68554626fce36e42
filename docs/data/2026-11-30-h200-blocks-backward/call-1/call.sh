#!/usr/bin/env bash
# One H200 at fcc557a + the backward in one launch (the working tree): its op case's checks and
# rows, the tests of the kernels whose bodies it runs, then the whole GPU suite.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
git log --oneline -1 > $L/commit.txt; git status --short >> $L/commit.txt; git diff > $L/working-tree.patch
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 16 >/tmp/build.log 2>&1 || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"
timeout 120 build/tests/gpu_tests --gtest_filter='*block_backward*:*block_forward*' > $L/case-tests.log 2>&1; echo "case tests rc $? $(el) s"; grep -E "^\[  (PASSED|FAILED) |Failure|Expected|error|not:" $L/case-tests.log | head -20
timeout 120 build/tiny_llama kernels --levels v5,v6 --ops block_backward --check > $L/check.log 2>&1; echo "check rc $? $(el) s"; grep -E "block_backward" $L/check.log | head -8
timeout 120 build/tiny_llama kernels --levels v5,v6 --ops block_backward,block_forward > $L/kernels.log 2>&1; echo "kernels rc $? $(el) s"; grep -E "block_|^op" $L/kernels.log | head -12
timeout 120 build/tiny_llama kernels --levels v5,v6 --ops block_backward --programmatic > $L/kernels-prog.log 2>&1; grep -E "block_" $L/kernels-prog.log | head -6
(cd build && timeout 250 ctest -L "^gpu$" -j 10 --timeout 240 --output-on-failure > $L/gpu-suite.log 2>&1); echo "suite rc $? $(el) s"; grep -E "tests passed|\(Failed\)|\*\*\*Failed|Timeout" $L/gpu-suite.log | head -20
echo "== done $(el) s"
