#!/usr/bin/env bash
# One H200: the block_forward op case with its v5 row: its tests, every kernels row's check,
# kernels' timing of the block forward (plain and programmatic).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
git log --oneline -1 > $L/commit.txt; git status --short >> $L/commit.txt
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 16 --target tiny_llama gpu_tests >/tmp/build.log 2>&1 || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"
timeout 200 build/tests/gpu_tests --gtest_filter='*GpuOpCase*block_forward*:*GpuOpCase*qkv_rope*:Fp8Model.BlocksForward*:GpuKernelCheck*' > $L/tests.log 2>&1; echo "tests rc $? $(el) s"; grep -E "^\[  (PASSED|FAILED) |Failure|rror|Value of|Expected" $L/tests.log | head -20
timeout 120 build/tiny_llama kernels --levels v6 --check > $L/kernels_check.log 2>&1; echo "check rc $?"; grep -E "block_forward|qkv_rope|^op " $L/kernels_check.log
timeout 120 build/tiny_llama kernels --levels v5,v6 --ops block_forward > $L/kernels.log 2>&1; echo "kernels rc $?"; grep -E "block_forward|^op" $L/kernels.log | head
timeout 120 build/tiny_llama kernels --levels v5,v6 --ops block_forward --programmatic > $L/kernels_prog.log 2>&1; grep -E "block_forward" $L/kernels_prog.log | head
echo "== done $(el) s"
