#!/usr/bin/env bash
# One H200: blocks-forward-in-one-launch with the norms as tasks of 16 rows: its test, v6 with and
# without it alternating; each task's times (.dev/trace-tasks.patch, a measurement); then the
# residual products in tiles of 128 x 32 (.dev/residual-32.patch): times, bits, bench.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
git log --oneline -1 > $L/commit.txt; git status --short >> $L/commit.txt
build() { cmake --build build -j 16 --target "$@" >/tmp/build.log 2>&1 || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }; }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1; build tiny_llama gpu_tests
echo "built $(el) s"; cp build/tiny_llama /tmp/tl_norm
timeout 100 build/tests/gpu_tests --gtest_filter='Fp8Model.BlocksForward*' > $L/tests.log 2>&1; echo "test rc $? $(el) s"; grep -E "^\[  (PASSED|FAILED) |Failure" $L/tests.log | head
B="bench --device cuda --levels v6 --precisions bf16 --batch-sizes 8 --seq-lens 128 --repeats 3"
S="--device cuda --version v6 --use-amp --seq-len 128 --num-steps 20 --log-every 1"
Tr="--device cuda --version v6 --use-amp --seq-len 128 --num-steps 3 --enable blocks-forward-in-one-launch --disable cuda-graph"
git apply .dev/trace-tasks.patch || exit 1; build tiny_llama; echo "traced $(el) s"
TT_TASK_TRACE=$L/tasks_norm.log timeout 60 build/tiny_llama $Tr > $L/run_norm.log 2>&1; echo "rc $?"; python3 .dev/tasks.py $L/tasks_norm.log 8
git apply .dev/residual-32.patch || exit 1; build tiny_llama; echo "r32 $(el) s"; cp build/tiny_llama /tmp/tl_r32
TT_TASK_TRACE=$L/tasks_r32.log timeout 60 build/tiny_llama $Tr > $L/run_r32.log 2>&1; echo "rc $?"; python3 .dev/tasks.py $L/tasks_r32.log 16
timeout 60 /tmp/tl_norm $S > $L/bits_off.log 2>&1; timeout 60 /tmp/tl_r32 $S --enable blocks-forward-in-one-launch > $L/bits_r32.log 2>&1
cmp <(grep -o "Loss: [0-9.]*" $L/bits_off.log) <(grep -o "Loss: [0-9.]*" $L/bits_r32.log) && echo "r32 losses the same ($(grep -c 'Loss:' $L/bits_off.log))"
for R in 1 2; do
  timeout 60 /tmp/tl_norm $B > $L/bench_off_$R.log 2>&1; timeout 60 /tmp/tl_norm $B --enable blocks-forward-in-one-launch > $L/bench_norm_$R.log 2>&1
  timeout 60 /tmp/tl_r32 $B --enable blocks-forward-in-one-launch > $L/bench_r32_$R.log 2>&1
  echo "round $R off $(grep -E '^v6 ' $L/bench_off_$R.log | awk '{print $5}') norm $(grep -E '^v6 ' $L/bench_norm_$R.log | awk '{print $5}') r32 $(grep -E '^v6 ' $L/bench_r32_$R.log | awk '{print $5}') $(el) s"
done
gzip $L/tasks_*.log
echo "== done $(el) s"
