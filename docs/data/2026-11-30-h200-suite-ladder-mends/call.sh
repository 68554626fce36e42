#!/usr/bin/env bash
# One H200: the whole GPU suite at HEAD (the block kernel's task count and the model's attention-norm
# helper mended); gpt2-small v5/v6 both orders (the tile headers moved since it was last measured);
# the ladder at the default shape against PyTorch, v6 with and without its block kernel.
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
(cd build && timeout 300 ctest -L "^gpu$" -j 10 --timeout 250 --output-on-failure > $L/gpu-suite.log 2>&1); echo "suite rc $? $(el) s"; grep -E "tests passed|\(Failed\)|\*\*\*Failed|Timeout" $L/gpu-suite.log | head -20
for O in v5,v6 v6,v5; do
  timeout 120 build/tiny_llama bench --device cuda --levels $O --precisions bf16 --preset gpt2-small --repeats 3 > $L/gpt2-small_$O.log 2>&1
  echo "gpt2-small $O: $(grep -E '^v[56] ' $L/gpt2-small_$O.log | awk '{print $1, $5}' | tr '\n' ' ') $(el) s"
done
timeout 200 python3 tools/pytorch_reference.py --modes compile+graph --precisions bf16 --json $L/pytorch.json > $L/pytorch.log 2>&1; echo "pytorch rc $? $(el) s"; tail -2 $L/pytorch.log
B="build/tiny_llama bench --device cuda --precisions bf16 --batch-sizes 8 --seq-lens 128 --repeats 3 --pytorch $L/pytorch.json"
for R in 1 2; do
  timeout 100 $B --levels v4,v5,v6 > $L/ladder_$R.log 2>&1; timeout 60 $B --levels v6 --enable blocks-forward-in-one-launch > $L/blocks_$R.log 2>&1
  echo "round $R $(el) s"; grep -E "^v[456] |holds|BROKEN|strongest" $L/ladder_$R.log; grep -E "^v6 |strongest" $L/blocks_$R.log
done
echo "== done $(el) s"
