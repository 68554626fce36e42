#!/usr/bin/env bash
# One H200: what the one-block kernel's RoPE turning back costs, by experiment variants (TT_EXP:
# 0 as built, 1 no dQ unrotate, 2 no dK unrotate, 3 dQ's table loads first, 4 none at all).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 32 --target tiny_llama >/tmp/build.log 2>&1) || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"
for rep in 1 2; do
for e in 0 1 2 3 4; do
  TT_EXP=$e timeout 40 build/tiny_llama --device cuda --version v5 --use-amp --enable-attention-backward-in-one-block --seq-len 128 --num-steps 15 --timing-warmup-steps 10 --profile-steps 3 --profile $L/p${e}_$rep > $L/p${e}_$rep.log 2>&1
  echo "exp $e: $(grep -E 'busy' $L/p${e}_$rep.log | head -1 | cut -c1-40) $(grep -E 'one_block' $L/p${e}_$rep/kernels.csv | cut -d, -f3-6)"
done
done
echo "== done $(el) s"
