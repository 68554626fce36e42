#!/usr/bin/env bash
# fp8-fused-attention measured again: two more ablations of v5 at gpt2-small.
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$(nproc)" --target tiny_llama >/tmp/build.log 2>&1) || { grep -B2 -A10 "error" /tmp/build.log | head -60; exit 1; }
for i in 2 3; do
  echo "== ablate gpt2-small $i $(date +%T)"
  timeout 170 build/tiny_llama ablate --device cuda --version v5 --use-amp --preset gpt2-small --num-steps 20 --csv $L/ablate_gpt2_$i.csv > $L/ablate_gpt2_$i.log 2>&1; echo "rc $?"; grep -E "^(full|-fp8-fused|-custom-att)" $L/ablate_gpt2_$i.log
done
