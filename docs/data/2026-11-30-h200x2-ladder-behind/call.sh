#!/usr/bin/env bash
# Two H200s at e7bd0cc: the ladder at the default shape beside PyTorch (GPU 0), v6's profile, then
# the two-rank multi-GPU tests (the lanes' follow() now skips a lane main has waited for).
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
timeout 120 python3 tools/pytorch_reference.py --modes compile+graph --precisions bf16 --json $L/pytorch.json > $L/pytorch.log 2>&1; echo "pytorch rc $? $(el) s"; tail -1 $L/pytorch.log
timeout 100 build/tiny_llama bench --device cuda --precisions bf16 --batch-sizes 8 --seq-lens 128 --repeats 5 --pytorch $L/pytorch.json --levels v4,v5,v6 --json $L/ladder.json > $L/ladder.log 2>&1; echo "ladder rc $? $(el) s"; grep -E "^v[456] |holds|BROKEN" $L/ladder.log
timeout 60 build/tiny_llama --device cuda --use-amp --timing-warmup-steps 10 --profile-steps 3 --version v6 --seq-len 128 --num-steps 15 --profile $L/prof_v6 > $L/prof_v6.log 2>&1; echo "profile rc $? $(el) s"; grep -E "busy" $L/prof_v6.log; gzip $L/prof_v6/trace.json
CUDA_VISIBLE_DEVICES=0,1 timeout 330 build/tests/multigpu_tests --gtest_filter='*2Gpus*:TwoNodes.*' > $L/multigpu.log 2>&1; echo "multigpu rc $? $(el) s"; grep -E "^\[  (PASSED|FAILED) |^\[       OK|Failure|FAILED  \]" $L/multigpu.log | head -20
echo "== done $(el) s"
