#!/usr/bin/env bash
# Two H200s: products leaving NCCL's SMs beside the backward (TT_SM_MARGIN: 0 off, else the SMs
# left), alternating benches at gpt2-small and medium; then traces of gpt2-small ZeRO-1 with and without.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader; nvidia-smi topo -m | head -4
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 32 >/tmp/build.log 2>&1) || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"
for rep in 1 2; do for p in gpt2-small medium; do for m in 0 24; do
  n=${p}_m${m}_$rep
  TT_SM_MARGIN=$m timeout 150 build/tiny_llama bench --nproc-per-node 2 --device cuda --version v4 --use-amp --preset $p --reduce-dtype fp32 --num-steps 60 --timing-warmup-steps 10 --log-every 1000 --json $L/$n.json > $L/$n.log 2>&1 || tail -5 $L/$n.log
  echo "$n: $(grep -E '^\| [0-9]' $L/$n.log | awk -F'|' '{printf "%s%s%s;", $2, $3, $6}') $(el) s"
done; done; done
for m in 16 32; do n=gpt2-small_m${m}_1
  TT_SM_MARGIN=$m timeout 150 build/tiny_llama bench --nproc-per-node 2 --device cuda --version v4 --use-amp --preset gpt2-small --reduce-dtype fp32 --num-steps 60 --timing-warmup-steps 10 --log-every 1000 --json $L/$n.json > $L/$n.log 2>&1 || tail -5 $L/$n.log
  echo "$n: $(grep -E '^\| [0-9]' $L/$n.log | awk -F'|' '{printf "%s%s%s;", $2, $3, $6}') $(el) s"
done
for m in 0 24; do
  TT_SM_MARGIN=$m timeout 120 build/tiny_llama --device cuda --version v4 --use-amp --preset gpt2-small --nproc-per-node 2 --zero 1 --reduce-dtype fp32 --num-steps 20 --timing-warmup-steps 10 --log-every 1000 --profile $L/trace-m$m --profile-steps 3 > $L/trace-m$m.log 2>&1 || tail -5 $L/trace-m$m.log
done
timeout 120 build/tiny_llama --device cuda --version v4 --use-amp --preset gpt2-small --num-steps 20 --timing-warmup-steps 10 --log-every 1000 --profile $L/trace-1gpu --profile-steps 3 > $L/trace-1gpu.log 2>&1
for m in 0 24; do python3 scripts/profile/overlap.py $L/trace-m$m/trace.json --one-gpu $L/trace-1gpu/trace.json > $L/overlap-m$m.txt 2>&1; head -30 $L/overlap-m$m.txt; done
for f in $L/trace-*/trace.json; do gzip $f; done
echo "== done $(el) s"
