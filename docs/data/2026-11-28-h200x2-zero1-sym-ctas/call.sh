#!/usr/bin/env bash
# ZeRO-1 (bf16 gathers) on 2 GPUs: NCCL_SYM_CTAS 16, 24 (the default), 32 at gpt2-small, twice,
# alternating; then the default shape with --grad-accum-steps 4.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$(nproc)" --target tiny_llama >/tmp/build.log 2>&1) || { tail -30 /tmp/build.log; exit 1; }
echo "built $(( $(date +%s) - T0 )) s"
for rep in 1 2; do
  for c in 16 24 32; do
    n=gpt2-small_${rep}_ctas$c
    NCCL_SYM_CTAS=$c timeout 200 build/tiny_llama bench --nproc-per-node 2 --device cuda --version v4 --use-amp --preset gpt2-small --reduce-dtype fp32 --num-steps 60 --timing-warmup-steps 10 --log-every 1000 --json $L/$n.json > $L/$n.log 2>&1 || tail -5 $L/$n.log
    echo "$n: $(grep -E "^\| 2 GPUs" $L/$n.log | awk -F'|' '{print $2 $6}' | tr '\n' ' ')"
  done
done
n=default_accum4
timeout 200 build/tiny_llama bench --nproc-per-node 2 --device cuda --version v4 --use-amp --batch-size 8 --seq-len 128 --grad-accum-steps 4 --reduce-dtype fp32 --num-steps 60 --timing-warmup-steps 10 --log-every 1000 --json $L/$n.json > $L/$n.log 2>&1 || tail -5 $L/$n.log
echo "$n: $(grep -E "^\| 2 GPUs" $L/$n.log | awk -F'|' '{print $2 $6}' | tr '\n' ' ')"
echo "== done $(( $(date +%s) - T0 )) s"
