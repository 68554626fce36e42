#!/usr/bin/env bash
# One H200: the next bf16 product's weights asked into L2 by a one-block kernel before it
# (.dev/prefetch-l2.patch, in this tree; TT_PREFETCH_L2=1), v6 and v5 alternating, three rounds.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 32 --target tiny_llama >/tmp/build.log 2>&1) || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"
for rep in 1 2 3; do
  line="round $rep:"
  for P in 0 1; do
    TT_PREFETCH_L2=$P timeout 60 build/tiny_llama bench --device cuda --levels v5,v6 --precisions bf16 --batch-sizes 8 --seq-lens 128 --repeats 3 > $L/prefetch${P}_$rep.log 2>&1
    line="$line p$P $(grep -E '^v[56] ' $L/prefetch${P}_$rep.log | awk '{print $1, $5, $NF}' | tr '\n' ' ')"
  done
  echo "$line"
done
for P in 0 1; do
  TT_PREFETCH_L2=$P timeout 40 build/tiny_llama --device cuda --version v6 --use-amp --seq-len 128 --num-steps 15 --timing-warmup-steps 10 --profile-steps 3 --profile $L/profile_p$P > $L/profile_p$P.log 2>&1
  echo "p$P: $(grep -m1 -E 'busy' $L/profile_p$P.log) launches $(grep -m1 'Kernel launches' $L/profile_p$P.log)"; grep -E "nvjet|prefetch" $L/profile_p$P/kernels.csv | cut -c1-110
  rm -f $L/profile_p$P/trace.json
done
echo "== done $(el) s"
