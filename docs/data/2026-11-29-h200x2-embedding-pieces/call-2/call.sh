#!/usr/bin/env bash
# Two H200s: the embedding's bucket in pieces (this tree) against its parent (.dev/base.tgz) at the
# default 8 x 128 (v4 bf16, fp32 sums), alternating benches.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
mkdir -p /tmp/base && tar xzf .dev/base.tgz -C /tmp/base
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 16 --target tiny_llama >/tmp/build.log 2>&1) & B1=$!
(cd /tmp/base && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg2.log 2>&1 && cmake --build build -j 16 --target tiny_llama >/tmp/build2.log 2>&1) & B2=$!
wait $B1 || { tail -30 /tmp/build.log; exit 1; }
wait $B2 || { tail -30 /tmp/build2.log; exit 1; }
echo "built $(el) s"
for rep in 1 2; do for tree in base new; do
  bin=build/tiny_llama; [ $tree = base ] && bin=/tmp/base/build/tiny_llama
  n=default_${tree}_$rep
  timeout 60 $bin bench --nproc-per-node 2 --device cuda --version v4 --use-amp --batch-size 8 --seq-len 128 --reduce-dtype fp32 --num-steps 60 --timing-warmup-steps 10 --log-every 1000 --json $L/$n.json > $L/$n.log 2>&1 || tail -5 $L/$n.log
  echo "$n: $(grep -E '^\| [0-9]' $L/$n.log | awk -F'|' '{printf "%s%s%s;", $2, $3, $6}') $(el) s"
done; done
echo "== done $(el) s"
