#!/usr/bin/env bash
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
cmake --build build -j "$(nproc)" --target tiny_llama >/tmp/build.log 2>&1 || { grep -B2 -A10 "error" /tmp/build.log | head -40; exit 1; }
for v in 1 2 3; do
  TT_EXP=$v timeout 60 build/tiny_llama --device cuda --version v5 --use-amp --preset gpt2-small --num-steps 9 --timing-warmup-steps 6 \
    --profile-steps 2 --log-every 100 --profile /tmp/prof > /tmp/exp_$v.log 2>&1; echo "exp $v rc $?"
  grep -E "flash_backward" /tmp/exp_$v.log | head -3
done
