#!/usr/bin/env bash
# Two H200s: the embedding's bucket in pieces of a layer's size at most (this tree) against its
# parent (.dev/base.tgz), alternating benches at gpt2-small; a trace of this tree
# (ZeRO-1) and one GPU; then four two-GPU multigpu tests (versions, recipe, resumes).
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
mkdir -p /tmp/base && tar xzf .dev/base.tgz -C /tmp/base
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 24 >/tmp/build.log 2>&1) & B1=$!
(cd /tmp/base && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg2.log 2>&1 && cmake --build build -j 8 --target tiny_llama >/tmp/build2.log 2>&1) & B2=$!
wait $B1 || { grep -B2 -A12 error /tmp/build.log | head -40; exit 1; }
wait $B2 || { tail -30 /tmp/build2.log; exit 1; }
echo "built $(el) s"
for rep in 1 2; do for P in gpt2-small; do for tree in base new; do
  bin=build/tiny_llama; [ $tree = base ] && bin=/tmp/base/build/tiny_llama
  n=${P}_${tree}_$rep
  timeout 150 $bin bench --nproc-per-node 2 --device cuda --version v4 --use-amp --preset $P --reduce-dtype fp32 --num-steps 60 --timing-warmup-steps 10 --log-every 1000 --json $L/$n.json > $L/$n.log 2>&1 || tail -5 $L/$n.log
  echo "$n: $(grep -E '^\| [0-9]' $L/$n.log | awk -F'|' '{printf "%s%s%s;", $2, $3, $6}') $(el) s"
done; done; done
timeout 120 build/tiny_llama --device cuda --version v4 --use-amp --preset gpt2-small --nproc-per-node 2 --zero 1 --reduce-dtype fp32 --num-steps 20 --timing-warmup-steps 10 --log-every 1000 --profile $L/trace-zero1 --profile-steps 3 > $L/trace-zero1.log 2>&1 || tail -5 $L/trace-zero1.log
timeout 120 build/tiny_llama --device cuda --version v4 --use-amp --preset gpt2-small --num-steps 20 --timing-warmup-steps 10 --log-every 1000 --profile $L/trace-1gpu --profile-steps 3 > $L/trace-1gpu.log 2>&1
python3 scripts/profile/overlap.py $L/trace-zero1/trace.json --one-gpu $L/trace-1gpu/trace.json > $L/overlap.txt 2>&1; head -12 $L/overlap.txt
for f in $L/trace-*/trace.json; do gzip $f; done
echo "== multigpu $(el) s"
cd build; t=$(( 590 - ($(date +%s) - T0) ))
timeout $t ctest -L multigpu -R "EveryVersion.*2Gpus|ShardedBf16.*2Gpus|Recipe.*2Gpus|FewerGpus.*2Gpus" --timeout 200 --output-on-failure > $L/multigpu.log 2>&1; echo "rc $?"
grep -E "tests passed|tests failed|Total Test time|\(Failed\)|\(Timeout\)|Skipped|Not Run" $L/multigpu.log | head -30
echo "== done $(el) s"
