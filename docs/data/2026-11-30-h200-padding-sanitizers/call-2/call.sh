#!/usr/bin/env bash
# One H200 at the tree (0891a21 plus the test changes): where racecheck's hardware exception in the
# backward block kernel's extra check comes from. The check plain, ten times; racecheck with and
# without the kernel filter, on the check, on `kernels --check` at the small model's shape (one row
# block, 9 weight-gradient tasks padded to 10) and at B8 T128; synccheck and memcheck at the small one.
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
FILT="--kernel-name kns=block_backward_gemm_kernel"
run() { local name=$1; shift; timeout 200 "$@" > $L/$name.log 2>&1; echo "$name rc $? $(el) s: $(grep -E 'SUMMARY|Internal|PASSED|FAILED  \]|error' $L/$name.log | head -3 | tr '\n' '|')"; }
run plain-x10 build/tests/gpu_tests $F --gtest_repeat=10
run kernels-small build/tiny_llama kernels --levels v6 --ops block_backward --check $SMALL
run race-small-filter compute-sanitizer --tool racecheck --error-exitcode 9 $FILT $K $SMALL
run race-small-all compute-sanitizer --tool racecheck --error-exitcode 9 $K $SMALL
run race-default-filter compute-sanitizer --tool racecheck --error-exitcode 9 $FILT $K
run race-test-all compute-sanitizer --tool racecheck --error-exitcode 9 build/tests/gpu_tests $F
run sync-small-filter compute-sanitizer --tool synccheck --error-exitcode 9 $FILT $K $SMALL
run mem-small-all compute-sanitizer --tool memcheck --error-exitcode 9 $K $SMALL
run init-small-filter compute-sanitizer --tool initcheck --error-exitcode 9 $FILT $K $SMALL
echo "== done $(el) s"
