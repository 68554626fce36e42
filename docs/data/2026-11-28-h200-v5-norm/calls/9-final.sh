#!/usr/bin/env bash
# Final call (a clean tree at the commit named): ablation, v4 and v5 beside PyTorch's strongest at
# gpt2-small and medium, the default shape, compute-sanitizer on v5 with every product in FP8.
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
N=$(nproc); T0=$(date +%s)
L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
left() { echo $(( 590 - ($(date +%s) - T0) )); }
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$N" --target tiny_llama >/tmp/build.log 2>&1) || { grep -B2 -A10 "error" /tmp/build.log | head -60; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== ablate gpt2-small $(date +%T)"
timeout 160 build/tiny_llama ablate --device cuda --version v5 --use-amp --preset gpt2-small --num-steps 20 --csv $L/ablate_gpt2.csv > $L/ablate_gpt2.log 2>&1; echo "rc $?"; grep -E "^(v5|full|-fp8|-fused-att)" $L/ablate_gpt2.log | head -12
echo "== gpt2-small $(date +%T)"
timeout 100 build/tiny_llama bench --device cuda --levels v4,v5 --precisions bf16 --timing-warmup-steps 5 --steps 10 --repeats 3 --preset gpt2-small --json $L/bench_gpt2.json > $L/bench_gpt2.log 2>&1; grep -E "^v[0-9]" $L/bench_gpt2.log
t=$(left); [ $t -gt 200 ] && t=120
PYTHONUNBUFFERED=1 timeout $t python3 tools/pytorch_reference.py --preset gpt2-small --vocab-size 50257 --vocab-multiple 128 \
  --modes compile+graph --precisions bf16 --steps 10 --repeats 3 --json $L/pytorch_gpt2.json > $L/pytorch_gpt2.log 2>&1; echo "rc $?"; grep -E "^pytorch|Error" $L/pytorch_gpt2.log
echo "== medium $(date +%T)"
timeout 60 build/tiny_llama bench --device cuda --levels v4,v5 --precisions bf16 --timing-warmup-steps 5 --steps 10 --repeats 3 --preset medium --json $L/bench_medium.json > $L/bench_medium.log 2>&1; grep -E "^v[0-9]" $L/bench_medium.log
echo "== default $(date +%T)"
timeout 60 build/tiny_llama bench --device cuda --levels v4,v5 --precisions bf16 --repeats 3 --json $L/bench_default.json > $L/bench_default.log 2>&1; grep -E "^v[0-9]" $L/bench_default.log
echo "== sanitizer $(date +%T)"
small="--batch-size 2 --seq-len 64 --hidden-dim 128 --num-heads 2 --num-layers 2 --num-steps 3 --version v5 --use-amp --enable-fp8-every-shape --device cuda"
for tool in memcheck racecheck; do
  t=$(left); [ $t -lt 25 ] && { echo "no time for $tool"; break; }
  timeout $t compute-sanitizer --tool $tool --error-exitcode 3 build/tiny_llama $small > $L/sanitizer_$tool.log 2>&1; echo "$tool rc $?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $L/sanitizer_$tool.log | head -3
done
t=$(left)
[ $t -gt 40 ] && { PYTHONUNBUFFERED=1 timeout $t python3 tools/pytorch_reference.py --preset medium --vocab-size 1000 --vocab-multiple 128 \
  --modes compile+graph --precisions bf16 --steps 10 --repeats 3 --json $L/pytorch_medium.json > $L/pytorch_medium.log 2>&1; echo "rc $?"; grep -E "^pytorch|Error" $L/pytorch_medium.log; }
echo "== done $(date +%T)"
