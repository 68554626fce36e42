#!/usr/bin/env bash
# One H200 at c254a59 (the tree): the blocks' cases and GpuMemory; the same GpuMemory test on a copy
# with llama.cpp as at 681cf92 (less .dev/layout.patch), where it is to fail; exercise 18 of v6.md
# as written (the task trace).
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
timeout 120 build/tests/gpu_tests --gtest_filter='*block_backward*:*block_forward*:GpuMemory.*' > $L/case-tests.log 2>&1; echo "case tests rc $? $(el) s"; grep -E "^\[  (PASSED|FAILED) |Failure" $L/case-tests.log | head -10
P=/tmp/parent; rm -rf $P; mkdir -p $P; cp -r $(git ls-files | cut -d/ -f1 | sort -u | grep -v '^docs$') $P/
(cd $P && patch -s -R -p1 < $OLDPWD/.dev/layout.patch) || { echo "patch failed"; exit 1; }
cmake -S $P -B $P/build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfgp.log 2>&1 && cmake --build $P/build -j 16 --target gpu_tests >/tmp/buildp.log 2>&1 || { grep -B2 -A12 "error" /tmp/buildp.log | head -60; exit 1; }
echo "built the copy $(el) s"
timeout 60 $P/build/tests/gpu_tests --gtest_filter='GpuMemory.MeasuredIsWhatIsBuilt' > $L/memory-681cf92-layout.log 2>&1; echo "memory at 681cf92's layout rc $?"; grep -E "^\[  (PASSED|FAILED) |Expected|Which is|measured|built" $L/memory-681cf92-layout.log | head -24
# Exercise 18, as v6.md writes it.
timeout 60 build/tiny_llama kernels --levels v5,v6 --ops block_backward --seq-lens 1024 > $L/ex18-kernels.log 2>&1; echo "ex18 kernels rc $?"; grep -E "block_backward" $L/ex18-kernels.log | head -12
python3 docs/data/2026-11-30-h200-blocks-backward/make-trace-patch.py src/ops/block_backward.cu /tmp/trace.patch src/backend/cuda/cuda_backend.cpp && git apply /tmp/trace.patch && echo "trace patch applied"
cmake --build build -j 16 --target tiny_llama >/tmp/build2.log 2>&1 || { grep -B2 -A12 "error" /tmp/build2.log | head -40; exit 1; }
rm -f /tmp/tasks.txt; TT_TASK_TRACE=/tmp/tasks.txt timeout 60 build/tiny_llama kernels --levels v6 --ops block_backward --seq-lens 1024 --check > $L/ex18-trace.log 2>&1; echo "trace rc $?"; cp /tmp/tasks.txt $L/ 2>/dev/null
python3 docs/data/2026-11-30-h200-blocks-backward/tasks.py /tmp/tasks.txt > $L/ex18-tasks.txt 2>&1; echo "tasks.py rc $?"; head -30 $L/ex18-tasks.txt
git apply -R /tmp/trace.patch && echo "trace patch undone"; git status --short | head
echo "== done $(el) s"
