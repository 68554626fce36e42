#!/usr/bin/env bash
# One H200 at 9676b79 (the tree): memcheck and racecheck of the backward's block kernel (its op
# case's check at both shapes), after a2e6f14 changed how its tasks guard and wait.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
git log --oneline -1 > $L/commit.txt; git status --short >> $L/commit.txt
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 16 --target tiny_llama >/tmp/build.log 2>&1 || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"
K="build/tiny_llama kernels --levels v6 --ops block_backward --seq-lens 1024"
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $K --check > $L/memcheck.log 2>&1; echo "memcheck rc $? $(el) s"; grep -E "ERROR SUMMARY|block_backward bwd" $L/memcheck.log | head -4
timeout 200 compute-sanitizer --tool racecheck --error-exitcode 9 $K --check > $L/racecheck.log 2>&1; echo "racecheck rc $? $(el) s"; grep -E "RACECHECK SUMMARY|ERROR SUMMARY|block_backward bwd" $L/racecheck.log | head -4; grep -E "^=========     at " $L/racecheck.log | sed 's/+0x.*//' | sort | uniq -c | head -6
echo "== done $(el) s"
