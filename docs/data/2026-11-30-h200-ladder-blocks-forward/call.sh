#!/usr/bin/env bash
# One H200: the ladder at the default shape against PyTorch's strongest in one job (v4, v5, v6 twice;
# v6 with blocks-forward-in-one-launch twice, alternating), at HEAD.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
git log --oneline -1 > $L/commit.txt; git status --short >> $L/commit.txt
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 16 --target tiny_llama >/tmp/build.log 2>&1 || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"
timeout 200 python3 tools/pytorch_reference.py --modes compile+graph --precisions bf16 --json $L/pytorch.json > $L/pytorch.log 2>&1; echo "pytorch rc $? $(el) s"; tail -3 $L/pytorch.log
B="build/tiny_llama bench --device cuda --precisions bf16 --batch-sizes 8 --seq-lens 128 --repeats 3 --pytorch $L/pytorch.json"
for R in 1 2; do
  timeout 100 $B --levels v4,v5,v6 > $L/ladder_$R.log 2>&1; timeout 60 $B --levels v6 --enable blocks-forward-in-one-launch > $L/blocks_$R.log 2>&1
  echo "round $R $(el) s"; grep -E "^v[456] |holds|BROKEN|strongest" $L/ladder_$R.log; grep -E "^v6 |strongest" $L/blocks_$R.log
done
echo "== done $(el) s"
