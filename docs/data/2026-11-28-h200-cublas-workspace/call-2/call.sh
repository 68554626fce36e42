#!/usr/bin/env bash
# Call 8 (one GPU): cuBLAS without a workspace (TT_WS_KIB=0, .dev/ws.patch: an experiment) against
# the parent (.dev/base): the 4-byte memsets before gpt2-small's products, and the steps.
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
N=$(nproc); T0=$(date +%s)
L=$OUT/logs; mkdir -p $L
trap 'rm -f $L/*/trace.json; tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$N" --target tiny_llama >/tmp/build.log 2>&1) &
(cd .dev/base && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg0.log 2>&1 && cmake --build build -j "$N" --target tiny_llama >/tmp/build0.log 2>&1) &
wait
[ -x build/tiny_llama ] && [ -x .dev/base/build/tiny_llama ] || { grep -B2 -A10 error /tmp/build.log /tmp/build0.log | head -40; exit 1; }
echo "built $(( $(date +%s) - T0 )) s"
step() { # name env bin args
  env $2 timeout 60 $3 --device cuda --use-amp --log-every 1000 ${@:4} > $L/$1.log 2>&1 || tail -3 $L/$1.log
  echo "$1: $(grep -E 'Average batch time' $L/$1.log | sed 's/Average batch time: //') loss $(grep 'Final loss' $L/$1.log | sed 's/Final loss: //')"; }
for rep in 1 2; do
  for v in v5 v4; do
    step ${v}_base_$rep X=1 .dev/base/build/tiny_llama --version $v --preset gpt2-small --num-steps 40 --timing-warmup-steps 10
    step ${v}_ws0_$rep TT_WS_KIB=0 build/tiny_llama --version $v --preset gpt2-small --num-steps 40 --timing-warmup-steps 10
  done
done
step v5_medium_base X=1 .dev/base/build/tiny_llama --version v5 --preset medium --num-steps 40 --timing-warmup-steps 10
step v5_medium_ws0 TT_WS_KIB=0 build/tiny_llama --version v5 --preset medium --num-steps 40 --timing-warmup-steps 10
step v4_default_base X=1 .dev/base/build/tiny_llama --version v4 --seq-len 128 --num-steps 300 --timing-warmup-steps 50
step v4_default_ws0 TT_WS_KIB=0 build/tiny_llama --version v4 --seq-len 128 --num-steps 300 --timing-warmup-steps 50
for b in base ws0; do
  bin=build/tiny_llama; e=TT_WS_KIB=0; [ $b = base ] && bin=.dev/base/build/tiny_llama && e=X=1
  env $e timeout 60 $bin --device cuda --use-amp --version v5 --preset gpt2-small --num-steps 9 --timing-warmup-steps 6 --profile-steps 2 --log-every 100 --profile $L/prof_$b > $L/profile_$b.log 2>&1
  echo "== $b: $(grep memset $L/prof_$b/kernels.csv) | $(grep -E 'the rows' $L/profile_$b.log)"
done
echo "== done $(( $(date +%s) - T0 )) s"
