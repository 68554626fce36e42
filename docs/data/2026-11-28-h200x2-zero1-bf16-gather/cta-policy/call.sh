#!/usr/bin/env bash
# NCCL's zero-CTA policy (copy-engine collectives where NCCL has them: ZeRO-1's all-gathers)
# against the default, 2 GPUs, v4 bf16, fp32 sums, alternating in one job; NCCL's log of one run.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$(nproc)" --target tiny_llama >/tmp/build.log 2>&1) || { tail -30 /tmp/build.log; exit 1; }
echo "built $(( $(date +%s) - T0 )) s"
NCCL_CTA_POLICY=2 NCCL_DEBUG=INFO timeout 120 build/tiny_llama --device cuda --version v4 --use-amp --preset medium --nproc-per-node 2 --zero 1 --num-steps 5 --log-every 1 > $L/nccl_info.log 2>&1
grep -iE "cta|policy|copy engine|\bCE\b|ncclAllGather|symmetric" $L/nccl_info.log | sort | uniq -c | sort -rn | head -20
for p in gpt2-small medium; do
  for rep in 1 2; do
    for v in "NCCL_CTA_POLICY=0" "NCCL_CTA_POLICY=2"; do
      n=${p}_${rep}_${v##*=}
      env $v timeout 200 build/tiny_llama bench --nproc-per-node 2 --device cuda --version v4 --use-amp --preset $p --reduce-dtype fp32 --num-steps 60 --timing-warmup-steps 10 --log-every 1000 --json $L/$n.json > $L/$n.log 2>&1 || tail -5 $L/$n.log
      echo "$n: $(grep -E "^\| 2 GPUs" $L/$n.log | awk -F'|' '{print $2 $6}' | tr '\n' ' ')"
    done
  done
done
echo "== done $(date +%T), $(( $(date +%s) - T0 )) s"
