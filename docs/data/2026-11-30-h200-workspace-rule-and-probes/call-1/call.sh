#!/usr/bin/env bash
# Next session's first call (one H200): the tests this session could not run (the lane's refusal
# line past 4096 tokens, the v6 bit tests' new helper), the fp32 ladder with and without
# products-without-workspace, and whether initcheck sees cuBLAS's writes (.dev/initcheck_probe.cu).
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
timeout 150 build/tests/gpu_tests --gtest_filter='Fp8Model.WeightGradientsBehind*:Fp8Model.RopeInQkv*' > $L/tests.log 2>&1; echo "tests rc $? $(el) s"; grep -E "^\[  (PASSED|FAILED) |Failure" $L/tests.log | head
F="build/tiny_llama bench --device cuda --precisions fp32 --levels v3,v4 --repeats 5 --batch-sizes 8 --seq-lens 128"
for R in 1 2; do
  timeout 90 $F > $L/fp32_$R.log 2>&1; timeout 90 $F --disable products-without-workspace > $L/fp32_ws_$R.log 2>&1
  echo "round $R: $(grep -E '^v[34] ' $L/fp32_$R.log | awk '{print $1, $5, $9}' | tr '\n' ' ') | with a workspace $(grep -E '^v[34] ' $L/fp32_ws_$R.log | awk '{print $1, $5, $9}' | tr '\n' ' ') $(el) s"
done
nvcc -arch=sm_90a -O2 -o /tmp/probe .dev/initcheck_probe.cu -lcublas && timeout 120 compute-sanitizer --tool initcheck --print-limit 4 /tmp/probe > $L/probe.log 2>&1; echo "probe rc $? $(grep -c Uninitialized $L/probe.log) reports $(el) s"; grep -A3 Uninitialized $L/probe.log | head -8
echo "== done $(el) s"
