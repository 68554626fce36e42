#!/usr/bin/env bash
# Call 6 (one H200, a clean tree): v5.md's profile (v5 gpt2-small with --flops-profile, v5
# medium), then v4/v5 beside PyTorch's strongest at gpt2-small and medium, and the default shape.
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
N=$(nproc); T0=$(date +%s)
L=$OUT/logs; mkdir -p $L
trap 'rm -f $L/*/trace.json; tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$N" --target tiny_llama >/tmp/build.log 2>&1) || { grep -B2 -A10 "error" /tmp/build.log | head -60; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "built $(( $(date +%s) - T0 )) s"
for run in "v5_gpt2:--version v5 --preset gpt2-small --num-steps 9 --timing-warmup-steps 6 --profile-steps 2 --flops-profile" \
           "v5_medium:--version v5 --preset medium --num-steps 30 --timing-warmup-steps 20 --profile-steps 3"; do
  n=${run%%:*}
  timeout 100 build/tiny_llama --device cuda --use-amp ${run#*:} --log-every 100 --profile $L/profile_$n > $L/profile_$n.log 2>&1 || tail -5 $L/profile_$n.log
  echo "== $n"; sed -n "/Kernel time by family/,/the rows/p" $L/profile_$n.log
done
echo "== gpt2-small $(date +%T)"
timeout 100 build/tiny_llama bench --device cuda --levels v4,v5 --precisions bf16 --timing-warmup-steps 5 --steps 10 --repeats 3 --preset gpt2-small --json $L/bench_gpt2.json > $L/bench_gpt2.log 2>&1; grep -E "^v[0-9]" $L/bench_gpt2.log
PYTHONUNBUFFERED=1 timeout 120 python3 tools/pytorch_reference.py --preset gpt2-small --vocab-size 50257 --vocab-multiple 128 \
  --modes compile+graph --precisions bf16 --steps 10 --repeats 3 --json $L/pytorch_gpt2.json > $L/pytorch_gpt2.log 2>&1; echo "rc $?"; grep -E "^pytorch|Error" $L/pytorch_gpt2.log
echo "== medium $(date +%T)"
timeout 60 build/tiny_llama bench --device cuda --levels v4,v5 --precisions bf16 --timing-warmup-steps 5 --steps 10 --repeats 3 --preset medium --json $L/bench_medium.json > $L/bench_medium.log 2>&1; grep -E "^v[0-9]" $L/bench_medium.log
PYTHONUNBUFFERED=1 timeout 100 python3 tools/pytorch_reference.py --preset medium --vocab-size 1000 --vocab-multiple 128 \
  --modes compile+graph --precisions bf16 --steps 10 --repeats 3 --json $L/pytorch_medium.json > $L/pytorch_medium.log 2>&1; echo "rc $?"; grep -E "^pytorch|Error" $L/pytorch_medium.log
echo "== default $(date +%T)"
timeout 60 build/tiny_llama bench --device cuda --levels v4,v5 --precisions bf16 --repeats 3 --json $L/bench_default.json > $L/bench_default.log 2>&1; grep -E "^v[0-9]" $L/bench_default.log
echo "== done $(( $(date +%s) - T0 )) s"
