#!/usr/bin/env bash
# One H200: the wait on a tile's parts as one overload (the tile product and weight-gradient tests,
# the v6 model tests), then bench with the repetitions as runs taking turns: the default ladder and
# gpt2-small, each beside PyTorch's strongest.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
git log --oneline -1 > $L/commit.txt; git status --short >> $L/commit.txt
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 16 >/tmp/build.log 2>&1 || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"
timeout 150 build/tests/gpu_tests --gtest_filter='GpuWeightGradients.*:GpuGatedProduct.*:GpuRopeProduct.*:Fp8Model.*' > $L/tile-tests.log 2>&1; echo "tile tests rc $? $(el) s"; grep -E "^\[  (PASSED|FAILED) |Failure" $L/tile-tests.log | head
timeout 120 python3 tools/pytorch_reference.py --modes compile+graph --precisions bf16 --json $L/pytorch.json > $L/pytorch.log 2>&1; echo "pytorch rc $? $(el) s"; tail -1 $L/pytorch.log
timeout 150 python3 tools/pytorch_reference.py --preset gpt2-small --modes compile+graph --precisions bf16 --repeats 3 --json $L/pytorch_gpt2.json > $L/pytorch_gpt2.log 2>&1; echo "pytorch gpt2 rc $? $(el) s"; tail -1 $L/pytorch_gpt2.log
timeout 100 build/tiny_llama bench --device cuda --precisions bf16 --batch-sizes 8 --seq-lens 128 --repeats 5 --pytorch $L/pytorch.json --levels v4,v5,v6 --json $L/ladder.json > $L/ladder.log 2>&1; echo "ladder rc $? $(el) s"; grep -E "^v[456] |holds|BROKEN" $L/ladder.log
for O in v5,v6 v6,v5; do
  timeout 120 build/tiny_llama bench --device cuda --levels $O --precisions bf16 --preset gpt2-small --repeats 4 --pytorch $L/pytorch_gpt2.json > $L/gpt2-small_$O.log 2>&1
  echo "gpt2-small $O rc $? $(el) s"; grep -E "^v[56] |holds|BROKEN" $L/gpt2-small_$O.log
done
echo "== done $(el) s"
