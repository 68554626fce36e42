#!/usr/bin/env bash
# One H200 at 0db9964 (products-without-workspace for bf16 only): the whole GPU suite, then the
# ladder at the default shape in fp32, tf32 and bf16 beside PyTorch's strongest, in this job.
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
(cd build && timeout 260 ctest -L "^gpu$" -j 10 --timeout 250 --output-on-failure > $L/gpu-suite.log 2>&1); echo "suite rc $? $(el) s"; grep -E "tests passed|\(Failed\)|\*\*\*Failed|Timeout" $L/gpu-suite.log | head -20
timeout 120 python3 tools/pytorch_reference.py --modes eager,compile+graph --precisions fp32,bf16 --json $L/pytorch.json > $L/pytorch.log 2>&1; echo "pytorch rc $? $(el) s"; grep -E "^pytorch" $L/pytorch.log | tail -4
timeout 200 build/tiny_llama bench --device cuda --precisions fp32,tf32,bf16 --batch-sizes 8 --seq-lens 128 --repeats 3 --pytorch $L/pytorch.json --json $L/ladder.json > $L/ladder.log 2>&1; echo "ladder rc $? $(el) s"; grep -E "^v[1-6] |holds|BROKEN|PyTorch" $L/ladder.log
echo "== done $(el) s"
