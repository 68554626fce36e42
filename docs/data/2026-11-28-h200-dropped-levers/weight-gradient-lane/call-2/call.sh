#!/usr/bin/env bash
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
N=$(nproc); T0=$(date +%s)
L=$OUT/logs; mkdir -p $L
trap 'rm -f $L/*/trace.json; tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$N" --target tiny_llama >/tmp/build.log 2>&1) || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
echo "built $(( $(date +%s) - T0 )) s"; nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
run() { timeout 60 build/tiny_llama --device cuda --use-amp --log-every 1000 $2 > $L/$1.log 2>&1 || tail -3 $L/$1.log
  echo "$1: $(grep -E 'Average batch time' $L/$1.log | sed 's/Average batch time: //') loss $(grep 'Final loss' $L/$1.log | sed 's/Final loss: //')"; }
for rep in 1 2; do
  run plain_$rep "--version v5 --num-steps 300 --timing-warmup-steps 50"
  run lane_$rep "--version v5 --num-steps 300 --timing-warmup-steps 50 --enable-weight-gradient-lane"
  TT_DX_FIRST=1 run lane_dxfirst_$rep "--version v5 --num-steps 300 --timing-warmup-steps 50 --enable-weight-gradient-lane"
done
timeout 100 build/tiny_llama bench --device cuda --levels v4,v5 --precisions bf16 --timing-warmup-steps 20 --steps 50 --repeats 3 > $L/bench_default.log 2>&1; grep -E "^v[0-9]" $L/bench_default.log
for rep in 1 2; do
  run gpt2_plain_$rep "--version v4 --preset gpt2-small --num-steps 40 --timing-warmup-steps 10"
  TT_DX_FIRST=1 run gpt2_lane_dxfirst_$rep "--version v4 --preset gpt2-small --num-steps 40 --timing-warmup-steps 10 --enable-weight-gradient-lane"
done
echo "== done $(( $(date +%s) - T0 )) s"
