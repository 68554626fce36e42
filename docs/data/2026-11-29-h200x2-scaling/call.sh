#!/usr/bin/env bash
# Two H200s, this tree (HEAD): the two-GPU scaling table of v4 bf16 (fp32 sums) at gpt2-small,
# medium, the default 8 x 128 with and without --grad-accum-steps 4, and of v5 at gpt2-small.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 32 --target tiny_llama >/tmp/build.log 2>&1) || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"
for spec in "gpt2-small:v4 --preset gpt2-small" "medium:v4 --preset medium" "default:v4 --batch-size 8 --seq-len 128" \
            "default-accum4:v4 --batch-size 8 --seq-len 128 --grad-accum-steps 4" "gpt2-small-v5:v5 --preset gpt2-small"; do
  n=${spec%%:*}; rest=${spec#*:}
  timeout 150 build/tiny_llama bench --nproc-per-node 2 --device cuda --version $rest --use-amp --reduce-dtype fp32 --num-steps 60 --timing-warmup-steps 10 --log-every 1000 --json $L/$n.json > $L/$n.log 2>&1 || tail -5 $L/$n.log
  echo "$n: $(grep -E '^\| [0-9]' $L/$n.log | awk -F'|' '{printf "%s%s%s%s;", $2, $3, $6, $7}') $(el) s"
done
echo "== done $(el) s"
