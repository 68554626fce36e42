#!/usr/bin/env bash
# One H200: after the review's fixes (barriers invalidated, fenced reset, checks): the block kernel's
# tests and the tiles', the kernel check, memcheck and racecheck on two steps, v6 with and without it.
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
timeout 200 build/tests/gpu_tests --gtest_filter='*GpuOpCase*block_forward*:*GpuOpCase*qkv_rope*:*GpuOpCase*gated_product*:Fp8Model.BlocksForward*:Fp8Model.RopeInQkv*:Fp8Model.SwigluInGateUp*:GpuRopeProduct*:GpuGatedProduct*:GpuKernelCheck*:GpuModel*v6*' > $L/tests.log 2>&1; echo "tests rc $? $(el) s"; grep -E "^\[  (PASSED|FAILED) |Failure" $L/tests.log | head -20
for tool in memcheck racecheck; do
  timeout 150 compute-sanitizer --tool $tool build/tiny_llama --device cuda --version v6 --use-amp --seq-len 128 --num-steps 2 --enable blocks-forward-in-one-launch > $L/$tool.log 2>&1; echo "$tool rc $? $(el) s"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $L/$tool.log; grep -c block_forward $L/$tool.log
done
B="build/tiny_llama bench --device cuda --levels v6 --precisions bf16 --batch-sizes 8 --seq-lens 128 --repeats 3"
timeout 60 $B > $L/bench_off.log 2>&1; timeout 60 $B --enable blocks-forward-in-one-launch > $L/bench_on.log 2>&1
echo "off $(grep -E '^v6 ' $L/bench_off.log | awk '{print $5}') on $(grep -E '^v6 ' $L/bench_on.log | awk '{print $5}')"
echo "== done $(el) s"
