#!/usr/bin/env bash
# Two H200s at 9cfa25f: the two-rank multi-GPU tests (fp32 products keep cuBLAS's workspace now),
# then gpt2-small's v5 and v6 beside PyTorch's strongest on GPU 0 (the first since the lane, which
# gpt2-small's FP8 products refuse), in both orders.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
git log --oneline -1 > $L/commit.txt; git status --short >> $L/commit.txt
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 30 >/tmp/build.log 2>&1 || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"
CUDA_VISIBLE_DEVICES=0,1 timeout 240 build/tests/multigpu_tests --gtest_filter='*2Gpus*:TwoNodes.*' > $L/multigpu.log 2>&1; echo "multigpu rc $? $(el) s"; grep -E "^\[  (PASSED|FAILED) |^\[       OK|Failure|FAILED  \]" $L/multigpu.log | head -20
export CUDA_VISIBLE_DEVICES=0
timeout 150 python3 tools/pytorch_reference.py --preset gpt2-small --modes compile+graph --precisions bf16 --repeats 3 --json $L/pytorch_gpt2.json > $L/pytorch_gpt2.log 2>&1; echo "pytorch gpt2 rc $? $(el) s"; tail -1 $L/pytorch_gpt2.log
for O in v5,v6 v6,v5; do
  timeout 120 build/tiny_llama bench --device cuda --levels $O --precisions bf16 --preset gpt2-small --repeats 4 --pytorch $L/pytorch_gpt2.json > $L/gpt2-small_$O.log 2>&1
  echo "gpt2-small $O rc $? $(el) s"; grep -E "^v[56] |holds|BROKEN" $L/gpt2-small_$O.log
done
echo "== done $(el) s"
