#!/usr/bin/env bash
# One H200, a clean tree at 8392b58 (the code of d7837f1): v4/v5 beside PyTorch's strongest at the
# default shape, gpt2-small and medium in one job, for v5.md's main table.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$(nproc)" --target tiny_llama >/tmp/build.log 2>&1) || { tail -30 /tmp/build.log; exit 1; }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader; echo "built $(el) s"
echo "== default $(el) s"
timeout 60 build/tiny_llama bench --device cuda --levels v4,v5 --precisions bf16 --repeats 3 --json $L/bench_default.json > $L/bench_default.log 2>&1; grep -E "^v[0-9]" $L/bench_default.log
PYTHONUNBUFFERED=1 timeout 100 python3 tools/pytorch_reference.py --modes compile+graph --precisions bf16 --steps 10 --repeats 3 --json $L/pytorch_default.json > $L/pytorch_default.log 2>&1; echo "rc $?"; grep -E "^pytorch|Error" $L/pytorch_default.log
echo "== gpt2-small $(el) s"
timeout 100 build/tiny_llama bench --device cuda --levels v4,v5 --precisions bf16 --timing-warmup-steps 5 --steps 10 --repeats 3 --preset gpt2-small --json $L/bench_gpt2.json > $L/bench_gpt2.log 2>&1; grep -E "^v[0-9]" $L/bench_gpt2.log
PYTHONUNBUFFERED=1 timeout 120 python3 tools/pytorch_reference.py --preset gpt2-small --vocab-size 50257 --vocab-multiple 128 \
  --modes compile+graph --precisions bf16 --steps 10 --repeats 3 --json $L/pytorch_gpt2.json > $L/pytorch_gpt2.log 2>&1; echo "rc $?"; grep -E "^pytorch|Error" $L/pytorch_gpt2.log
echo "== medium $(el) s"
timeout 60 build/tiny_llama bench --device cuda --levels v4,v5 --precisions bf16 --timing-warmup-steps 5 --steps 10 --repeats 3 --preset medium --json $L/bench_medium.json > $L/bench_medium.log 2>&1; grep -E "^v[0-9]" $L/bench_medium.log
PYTHONUNBUFFERED=1 timeout 100 python3 tools/pytorch_reference.py --preset medium --vocab-size 1000 --vocab-multiple 128 \
  --modes compile+graph --precisions bf16 --steps 10 --repeats 3 --json $L/pytorch_medium.json > $L/pytorch_medium.log 2>&1; echo "rc $?"; grep -E "^pytorch|Error" $L/pytorch_medium.log
echo "== done $(el) s"
