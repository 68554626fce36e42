#!/usr/bin/env bash
# One H200 at fcc557a + the backward in one launch (the working tree: input gradients' tiles of 64
# columns, the cluster's first barrier before any distributed write): the op cases' tests and the
# tests of the kernels whose bodies it shares, memcheck and racecheck, its rows against v5 plain and
# programmatic, the run header with the switch; then with .dev/bb/trace.patch: v6's operations one by
# one (TT_ONE_BY_ONE), each task's times (TT_TASK_TRACE), and ncu's time of each kernel one by one.
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
timeout 200 build/tests/gpu_tests --gtest_filter='*GpuOpCase*:GpuKernelCheck.*:GpuGatedProduct.*:GpuWeightGradients.*:Fp8Model.BlocksForward*:*GpuModel.*v6*' > $L/tests.log 2>&1; echo "tests rc $? $(el) s"; grep -E "^\[  (PASSED|FAILED) |Failure" $L/tests.log | head
K="build/tiny_llama kernels --levels v6 --ops block_backward --seq-lens 1024"
timeout 110 compute-sanitizer --tool memcheck --error-exitcode 9 $K --check > $L/memcheck.log 2>&1; echo "memcheck rc $? $(el) s"; grep -E "ERROR SUMMARY" $L/memcheck.log | head -2
timeout 110 compute-sanitizer --tool racecheck --error-exitcode 9 $K --check > $L/racecheck.log 2>&1; echo "racecheck rc $? $(el) s"; grep -E "RACECHECK SUMMARY|ERROR SUMMARY" $L/racecheck.log | head -2; grep -E "^=========     at " $L/racecheck.log | sed 's/+0x.*//' | sort | uniq -c | head -4
rows() { grep -E "^block_backward" $1 | grep -E "B8 T128" | awk '{printf "%s %s %s | ", $2, $5, $6}'; echo; }
for R in 1 2; do
  timeout 60 build/tiny_llama kernels --levels v5,v6 --ops block_backward --seq-lens 1024 > $L/kernels-$R.log 2>&1; echo "one launch, plain $R: $(rows $L/kernels-$R.log)"
  timeout 60 build/tiny_llama kernels --levels v5,v6 --ops block_backward --seq-lens 1024 --programmatic > $L/kernels-prog-$R.log 2>&1; echo "one launch, programmatic $R: $(rows $L/kernels-prog-$R.log)"
done
timeout 30 build/tiny_llama --device cuda --use-amp --version v6 --enable blocks-backward-in-one-launch --seq-len 128 --num-steps 3 > $L/run.log 2>&1; echo "run rc $?"; grep -E "^Products|backward" $L/run.log | head -3
git apply .dev/bb/trace.patch || exit 1
cmake --build build -j 16 --target tiny_llama >/tmp/build2.log 2>&1 || { grep -B2 -A12 "error" /tmp/build2.log | head -40; exit 1; }
echo "trace built $(el) s"
for R in 1 2; do
  TT_ONE_BY_ONE=1 timeout 60 build/tiny_llama kernels --levels v6 --ops block_backward --seq-lens 1024 > $L/one-by-one-$R.log 2>&1; echo "v6 one by one, plain $R: $(rows $L/one-by-one-$R.log)"
  TT_ONE_BY_ONE=1 timeout 60 build/tiny_llama kernels --levels v6 --ops block_backward --seq-lens 1024 --programmatic > $L/one-by-one-prog-$R.log 2>&1; echo "v6 one by one, programmatic $R: $(rows $L/one-by-one-prog-$R.log)"
done
TT_TASK_TRACE=$L/tasks.txt timeout 100 $K --check > $L/trace.log 2>&1; echo "trace rc $? $(el) s"; python3 .dev/bb/tasks.py $L/tasks.txt > $L/tasks-summary.txt; head -12 $L/tasks-summary.txt
TT_ONE_BY_ONE=1 timeout 150 ncu --metrics gpu__time_duration.sum --csv $K --check > $L/ncu-one-by-one.csv 2> $L/ncu.err; echo "ncu rc $? $(el) s"; grep -c gpu__time_duration $L/ncu-one-by-one.csv
echo "== done $(el) s"
