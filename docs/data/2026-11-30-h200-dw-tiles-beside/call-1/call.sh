#!/usr/bin/env bash
# One H200 at dc9344a + wait_behind over wait_lane: a v6 profile at the default shape (trace kept),
# the bf16 ladder beside PyTorch's strongest in this job, then the whole GPU suite.
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
timeout 60 build/tiny_llama --device cuda --use-amp --timing-warmup-steps 10 --profile-steps 3 --version v6 --seq-len 128 --num-steps 15 --profile $L/prof > $L/prof.log 2>&1
echo "profile rc $? $(el) s"; grep -E "busy|Products" $L/prof.log | head -3
timeout 100 python3 tools/pytorch_reference.py --modes eager,compile+graph --precisions bf16 --json $L/pytorch.json > $L/pytorch.log 2>&1; echo "pytorch rc $? $(el) s"; grep -E "^pytorch" $L/pytorch.log | tail -2
timeout 120 build/tiny_llama bench --device cuda --precisions bf16 --batch-sizes 8 --seq-lens 128 --repeats 3 --pytorch $L/pytorch.json --json $L/ladder.json > $L/ladder.log 2>&1; echo "ladder rc $? $(el) s"; grep -E "^v[1-6] |holds|BROKEN|PyTorch" $L/ladder.log
(cd build && timeout 250 ctest -L "^gpu$" -j 10 --timeout 240 --output-on-failure > $L/gpu-suite.log 2>&1); echo "suite rc $? $(el) s"; grep -E "tests passed|\(Failed\)|\*\*\*Failed|Timeout" $L/gpu-suite.log | head -20
echo "== done $(el) s"
