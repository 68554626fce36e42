#!/usr/bin/env bash
# Two H200s: the ffn backward with both input gradients before both weight gradients (this tree)
# against its parent c53748f (.dev/base.tgz) in one job. Alternating benches of gpt2-small and
# medium (bench --nproc-per-node 2, v4 bf16, fp32 sums), then traces of the child on one GPU and
# as ZeRO-1 on two, read by overlap.py and per kernel.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
mkdir -p /tmp/base && tar xzf .dev/base.tgz -C /tmp/base
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 20 >/tmp/build.log 2>&1) & B1=$!
(cd /tmp/base && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg2.log 2>&1 && cmake --build build -j 12 --target tiny_llama >/tmp/build2.log 2>&1) & B2=$!
wait $B1 || { tail -30 /tmp/build.log; exit 1; }
wait $B2 || { tail -30 /tmp/build2.log; exit 1; }
echo "built $(el) s"
for rep in 1 2; do for p in gpt2-small medium; do for tree in base new; do
  bin=build/tiny_llama; [ $tree = base ] && bin=/tmp/base/build/tiny_llama
  n=${p}_${tree}_$rep
  timeout 120 $bin bench --nproc-per-node 2 --device cuda --version v4 --use-amp --preset $p --reduce-dtype fp32 --num-steps 60 --timing-warmup-steps 10 --log-every 1000 --json $L/$n.json > $L/$n.log 2>&1 || tail -5 $L/$n.log
  echo "$n: $(grep -E '^\| [0-9]' $L/$n.log | awk -F'|' '{printf "%s%s%s;", $2, $3, $6}')"
done; done; done
echo "== traces $(el) s"
for p in gpt2-small medium; do for z in 1gpu zero1; do
  extra=""; [ $z = zero1 ] && extra="--nproc-per-node 2 --zero 1 --reduce-dtype fp32"
  timeout 120 build/tiny_llama --device cuda --version v4 --use-amp --preset $p $extra --num-steps 20 --timing-warmup-steps 10 \
    --log-every 1000 --profile $L/trace-${p}-$z --profile-steps 3 > $L/trace-${p}-$z.log 2>&1 || tail -5 $L/trace-${p}-$z.log
done
python3 scripts/profile/overlap.py $L/trace-${p}-zero1/trace.json --one-gpu $L/trace-${p}-1gpu/trace.json | tee $L/overlap-$p.txt
done
for f in $L/trace-*/trace.json; do gzip $f; done
echo "== done $(el) s"
