#!/usr/bin/env bash
# One H200 at f037f7a: initcheck watching every kernel (the filtered one of call 2 watched only the
# block kernel, so never saw the forward's writes it reads), at the small model's shape (padding)
# and over the op case's extra check (both shapes); memcheck likewise over the check.
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
F='--gtest_filter=Cases/GpuOpCase.ExtraChecks/block_backward_v6_bf16'
SMALL="--batch-size 1 --seq-len 128 --hidden-dim 128 --num-heads 2 --num-kv-heads 1 --head-dim 64 --intermediate-size 256"
K="build/tiny_llama kernels --levels v6 --ops block_backward --check"
run() { local name=$1; shift; timeout 250 "$@" > $L/$name.log 2>&1; echo "$name rc $? $(el) s: $(grep -E 'SUMMARY|Internal|PASSED|FAILED  \]|rows match' $L/$name.log | head -3 | tr '\n' '|')"; }
run init-small-all compute-sanitizer --tool initcheck --error-exitcode 9 $K $SMALL
run init-test-all compute-sanitizer --tool initcheck --error-exitcode 9 build/tests/gpu_tests $F
run mem-test-all compute-sanitizer --tool memcheck --error-exitcode 9 build/tests/gpu_tests $F
echo "== done $(el) s"
