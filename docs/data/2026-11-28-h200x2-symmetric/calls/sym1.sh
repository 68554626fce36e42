#!/usr/bin/env bash
# Every GPU of the machine: build; one short run with NCCL's log (is the window there, which kernels); medium scaling
# with symmetric windows and without (NCCL_WIN_ENABLE=0), fp32 sums, one job.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
echo "== build $(date +%T)"
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$(nproc)" >/tmp/build.log 2>&1) || { tail -30 /tmp/cfg.log /tmp/build.log; exit 1; }
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
L=$OUT/logs; mkdir -p $L; G=$(nvidia-smi -L | wc -l)
if [ -z "${NOLOG:-}" ]; then echo "== NCCL log, medium $G ranks $(date +%T)"
NCCL_DEBUG=INFO timeout 120 build/tiny_llama --device cuda --version v4 --use-amp --preset medium --nproc-per-node $G --num-steps 20 --timing-warmup-steps 5 --log-every 1000 > $L/nccl-log.txt 2>&1
grep -iE "symmetric|window|symk|Average|error" $L/nccl-log.txt | sort | uniq -c | head -30; fi
for spec in ${SPECS:-"medium:--preset medium" "gpt2-small:--preset gpt2-small"}; do
  name=${spec%%:*}
  for v in ${VARIANTS:-"NCCL_WIN_ENABLE=1" "NCCL_WIN_ENABLE=0"}; do
    win=${v//[^0-9A-Za-z]/_}
    echo "== $name $v $(date +%T)"
    env $v timeout 400 build/tiny_llama bench --nproc-per-node $G --device cuda --version v4 --use-amp ${spec#*:} \
      --reduce-dtype ${REDUCE:-fp32} --num-steps 60 --timing-warmup-steps 10 --log-every 1000 --json $L/scaling_${name}_win$win.json > $L/scaling_${name}_win$win.log 2>&1 || tail -20 $L/scaling_${name}_win$win.log
    grep -E "^\|" $L/scaling_${name}_win$win.log
  done
done
tar czf $OUT/logs.tgz -C $L . && rm -rf $L
echo "== done $(date +%T)"
