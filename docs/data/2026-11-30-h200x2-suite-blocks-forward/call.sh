#!/usr/bin/env bash
# Two H200s: the whole GPU suite at HEAD (GPU 0) and every version on two ranks (v6 with
# blocks-forward-in-one-launch too); the header of a two-rank run with it.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
git log --oneline -1 > $L/commit.txt; git status --short >> $L/commit.txt
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 30 >/tmp/build.log 2>&1 || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"
(cd build && timeout 260 ctest -L "^gpu$" -j 10 --timeout 220 --output-on-failure > $L/gpu-suite.log 2>&1); echo "suite rc $? $(el) s"; grep -E "tests passed|\(Failed\)|\*\*\*Failed|Timeout" $L/gpu-suite.log | head -20
CUDA_VISIBLE_DEVICES=0,1 timeout 100 build/tests/multigpu_tests --gtest_filter='*EveryVersion*/2Gpus' > $L/multigpu.log 2>&1; echo "multigpu rc $? $(el) s"; grep -E "^\[  (PASSED|FAILED) |Failure" $L/multigpu.log | head
CUDA_VISIBLE_DEVICES=0,1 timeout 60 build/tiny_llama --nproc-per-node 2 --device cuda --version v6 --use-amp --seq-len 128 --batch-size 4 --num-steps 5 --enable blocks-forward-in-one-launch > $L/two-ranks.log 2>&1; echo "two ranks rc $?"; grep -E "Products|Data parallel" $L/two-ranks.log | head -3
echo "== done $(el) s"
