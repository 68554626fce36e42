#!/usr/bin/env bash
# Two H200s, a clean tree at HEAD: (1) the 2-GPU multigpu tests (products-without-workspace is in
# v4 now); (2) scaling at gpt2-small and medium, v4 bf16 fp32 sums; (3) traces of gpt2-small on one
# GPU and on two ranks with ZeRO-1 (rank 0), for what stands between 95.8% and 97.5%.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$(nproc)" >/tmp/build.log 2>&1) || { tail -30 /tmp/build.log; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "built $(el) s; $(git log --oneline -1 2>/dev/null)"
for p in gpt2-small medium; do
  timeout 200 build/tiny_llama bench --nproc-per-node 2 --device cuda --version v4 --use-amp --preset $p --reduce-dtype fp32 --num-steps 60 --timing-warmup-steps 10 --log-every 1000 --json $L/$p.json > $L/$p.log 2>&1 || tail -5 $L/$p.log
  echo "== $p $(el) s"; grep -E "^\| [0-9]" $L/$p.log
done
for z in 1gpu zero1; do
  extra=""; [ $z = zero1 ] && extra="--nproc-per-node 2 --zero 1 --reduce-dtype fp32"
  timeout 120 build/tiny_llama --device cuda --version v4 --use-amp --preset gpt2-small $extra --num-steps 20 --timing-warmup-steps 10 \
    --log-every 1000 --profile $L/trace-$z --profile-steps 3 > $L/trace-$z.log 2>&1 || tail -5 $L/trace-$z.log
  grep -E "Average batch time" $L/trace-$z.log
done
python3 scripts/profile/overlap.py $L/trace-zero1/trace.json --one-gpu $L/trace-1gpu/trace.json | tee $L/overlap.txt
echo "== multigpu tests $(el) s"
(cd build && timeout 300 ctest -L multigpu -R "2Gpus" --output-on-failure > $L/multigpu.log 2>&1)
grep -E "tests passed|tests failed|Test +#" $L/multigpu.log | head -20
grep -E "Failure|Expected|Which is|actual|\[ killed|\[ signal|\[ error" $L/multigpu.log | head -20
for f in $L/trace-*/trace.json; do gzip $f; done
echo "== done $(el) s"
