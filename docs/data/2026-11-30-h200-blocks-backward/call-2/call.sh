#!/usr/bin/env bash
# One H200 at fcc557a + the backward in one launch (the working tree, input gradients' tiles of 128
# columns): the kernel check's row count, the case's bit tests, its rows
# plain and programmatic; then with .dev/bb/trace.patch: v6's operations one by one (TT_ONE_BY_ONE)
# and each task's times (TT_TASK_TRACE); then with tiles of 64 columns (dx64.patch) the same, and
# memcheck and racecheck of that build.
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
timeout 120 build/tests/gpu_tests --gtest_filter='GpuKernelCheck.EveryRowMatches:*block_backward_v6_bf16*' > $L/tests.log 2>&1; echo "tests rc $? $(el) s"; grep -E "^\[  (PASSED|FAILED) |Failure" $L/tests.log | head
K="build/tiny_llama kernels --levels v6 --ops block_backward --seq-lens 1024"
rows() { grep -E "^block_backward" $1 | grep -E "B8 T128" | awk '{printf "%s %s %s | ", $2, $4, $5}'; echo; }
for R in 1 2; do
  timeout 60 build/tiny_llama kernels --levels v5,v6 --ops block_backward --seq-lens 1024 > $L/kernels-$R.log 2>&1; echo "one launch, plain $R: $(rows $L/kernels-$R.log)"
  timeout 60 build/tiny_llama kernels --levels v5,v6 --ops block_backward --seq-lens 1024 --programmatic > $L/kernels-prog-$R.log 2>&1; echo "one launch, programmatic $R: $(rows $L/kernels-prog-$R.log)"
done
git apply .dev/bb/trace.patch || exit 1
cmake --build build -j 16 --target tiny_llama >/tmp/build2.log 2>&1 || { grep -B2 -A12 "error" /tmp/build2.log | head -40; exit 1; }
echo "trace built $(el) s"
for R in 1 2; do
  TT_ONE_BY_ONE=1 timeout 60 build/tiny_llama kernels --levels v6 --ops block_backward --seq-lens 1024 > $L/one-by-one-$R.log 2>&1; echo "v6 one by one, plain $R: $(rows $L/one-by-one-$R.log)"
  TT_ONE_BY_ONE=1 timeout 60 build/tiny_llama kernels --levels v6 --ops block_backward --seq-lens 1024 --programmatic > $L/one-by-one-prog-$R.log 2>&1; echo "v6 one by one, programmatic $R: $(rows $L/one-by-one-prog-$R.log)"
done
TT_TASK_TRACE=$L/tasks-128.txt timeout 100 $K --check > $L/trace-128.log 2>&1; echo "trace rc $? $(el) s"; python3 .dev/bb/tasks.py $L/tasks-128.txt | head -12
git apply .dev/bb/dx64.patch || exit 1
cmake --build build -j 16 --target tiny_llama gpu_tests >/tmp/build3.log 2>&1 || { grep -B2 -A12 "error" /tmp/build3.log | head -40; exit 1; }
echo "dx64 built $(el) s"
timeout 120 build/tests/gpu_tests --gtest_filter='*block_backward_v6_bf16*' > $L/tests-64.log 2>&1; echo "tests 64 rc $? $(el) s"; grep -E "^\[  (PASSED|FAILED) |Failure" $L/tests-64.log | head
for R in 1 2; do
  timeout 60 build/tiny_llama kernels --levels v6 --ops block_backward --seq-lens 1024 > $L/kernels64-$R.log 2>&1; echo "64 columns, plain $R: $(rows $L/kernels64-$R.log)"
  timeout 60 build/tiny_llama kernels --levels v6 --ops block_backward --seq-lens 1024 --programmatic > $L/kernels64-prog-$R.log 2>&1; echo "64 columns, programmatic $R: $(rows $L/kernels64-prog-$R.log)"
done
TT_TASK_TRACE=$L/tasks-64.txt timeout 100 $K --check > $L/trace-64.log 2>&1; echo "trace 64 rc $? $(el) s"; python3 .dev/bb/tasks.py $L/tasks-64.txt | head -12
timeout 110 compute-sanitizer --tool memcheck --error-exitcode 9 $K --check > $L/memcheck.log 2>&1; echo "memcheck rc $? $(el) s"; grep -E "ERROR SUMMARY|block_backward" $L/memcheck.log | head -4
timeout 110 compute-sanitizer --tool racecheck --error-exitcode 9 $K --check > $L/racecheck.log 2>&1; echo "racecheck rc $? $(el) s"; grep -E "RACECHECK SUMMARY|ERROR SUMMARY|hazard" $L/racecheck.log | head -4
echo "== done $(el) s"
