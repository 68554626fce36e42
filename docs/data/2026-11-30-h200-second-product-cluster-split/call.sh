#!/usr/bin/env bash
# Two H200s, the session's last check: the second product's tile split over a cluster
# (.dev/cdown/cluster_down.cu, at K 2048 and 512, twice, and under memcheck and racecheck), then
# the whole GPU suite at HEAD (GPU 0, with each failure's output) and every version on two ranks.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 28 >/tmp/build.log 2>&1) &
B=$!
nvcc -std=c++17 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -O3 -Isrc .dev/cdown/cluster_down.cu -o /tmp/cdown -lcublas || exit 1
for run in 1 2; do for k in 2048 512; do timeout 60 /tmp/cdown $k > $L/cdown_k${k}_$run.log 2>&1; done; done
grep -h "cublas\|128 x" $L/cdown_k2048_1.log | cut -c1-110
for tool in memcheck racecheck; do timeout 200 compute-sanitizer --tool $tool /tmp/cdown 2048 short > $L/cdown_$tool.log 2>&1; echo "$tool rc $? $(tail -1 $L/cdown_$tool.log)"; done
wait $B || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"
(cd build && timeout 300 ctest -L "^gpu$" -j 10 --timeout 250 --output-on-failure > $L/gpu-suite.log 2>&1); echo "suite rc $? $(el) s"; grep -E "tests passed|\(Failed\)|\*\*\*Failed" $L/gpu-suite.log | head -20
CUDA_VISIBLE_DEVICES=0,1 timeout 150 build/tests/multigpu_tests --gtest_filter='*EveryVersion*/2Gpus' > $L/multigpu.log 2>&1; echo "multigpu rc $? $(el) s"; grep -E "^\[  (PASSED|FAILED) " $L/multigpu.log
echo "== done $(el) s"
