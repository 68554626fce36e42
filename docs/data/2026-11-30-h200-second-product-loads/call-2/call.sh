#!/usr/bin/env bash
# One H200: the second product's tile in cuBLAS's structure (a producer warp, two consumer
# warpgroups of 32 columns each) and the tiles' order over the grid (.dev/cdown/probe.cu).
set -uo pipefail
export CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
nvcc -std=c++17 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -O3 -Isrc -diag-suppress 177 .dev/cdown/probe.cu -o /tmp/probe -lcublas || exit 1
for run in 1 2; do for k in 2048 4096; do timeout 90 /tmp/probe $k > $L/probe_k${k}_$run.log 2>&1; echo "k$k r$run rc $?"; done; done
grep -h "cublasGemmEx\|pairs2\|promotion 256" $L/probe_k2048_1.log | cut -c1-140
grep -h "cublasGemmEx\|pairs2" $L/probe_k4096_1.log | cut -c1-140
timeout 120 compute-sanitizer --tool memcheck /tmp/probe 2048 short > $L/memcheck.log 2>&1; echo "memcheck rc $? $(tail -1 $L/memcheck.log)"
echo "== done $(el) s"
