#!/usr/bin/env bash
# Call 3 (an experiment build, not committed): where the fused backward's time goes.
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
N=$(nproc)
L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$N" --target tiny_llama >/tmp/build.log 2>&1) || { grep -B2 -A10 "error" /tmp/build.log | head -60; exit 1; }
for v in 0 1 2 off; do
  flag=""; [ $v = off ] && flag="--disable-fused-attention-backward"
  TT_EXP=$v timeout 60 build/tiny_llama --device cuda --version v5 --use-amp --preset gpt2-small --num-steps 9 --timing-warmup-steps 6 \
    --profile-steps 2 --log-every 100 --profile $OUT/prof $flag > $L/exp_$v.log 2>&1; echo "exp $v rc $?"; rm -rf $OUT/prof
  grep -E "measured|flash_|  attention " $L/exp_$v.log | head -8
done
