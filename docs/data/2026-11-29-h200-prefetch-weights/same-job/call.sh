#!/usr/bin/env bash
# Next session, two H200s: (1) the prefetch baseline in one job: the parent tree 4351295 (before
# Successor carried L2 requests) against HEAD with prefetch-weights off and on, v6, alternating,
# three rounds; (2) the whole GPU suite at HEAD (GPU 0) and every version on two ranks.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
mkdir -p /tmp/parent && git archive 4351295 | tar x -C /tmp/parent || exit 1
(cmake -S /tmp/parent -B /tmp/parent/build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg0.log 2>&1 && cmake --build /tmp/parent/build -j 16 --target tiny_llama >/tmp/build0.log 2>&1) &
P=$!
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 16 >/tmp/build.log 2>&1) || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
wait $P || { tail -20 /tmp/build0.log; exit 1; }
echo "built $(el) s"
B="bench --device cuda --levels v6 --precisions bf16 --batch-sizes 8 --seq-lens 128 --repeats 3"
for rep in 1 2 3; do
  timeout 40 /tmp/parent/build/tiny_llama $B > $L/parent_$rep.log 2>&1
  timeout 40 build/tiny_llama $B --disable-prefetch-weights > $L/off_$rep.log 2>&1
  timeout 40 build/tiny_llama $B > $L/on_$rep.log 2>&1
  echo "round $rep: parent $(grep -E '^v6 ' $L/parent_$rep.log | awk '{print $5}') off $(grep -E '^v6 ' $L/off_$rep.log | awk '{print $5}') on $(grep -E '^v6 ' $L/on_$rep.log | awk '{print $5}')"
done
echo "benches $(el) s"
(cd build && timeout 280 ctest -L "^gpu$" -j 10 --timeout 250 > $L/gpu-suite.log 2>&1); echo "suite rc $? $(el) s"; grep -E "tests passed|Failed|\*\*\*" $L/gpu-suite.log | head -20
CUDA_VISIBLE_DEVICES=0,1 timeout 150 build/tests/multigpu_tests --gtest_filter='*EveryVersion*/2Gpus' > $L/multigpu.log 2>&1; echo "multigpu rc $? $(el) s"; grep -E "^\[  (PASSED|FAILED) " $L/multigpu.log
echo "== done $(el) s"
