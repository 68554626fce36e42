#!/usr/bin/env bash
# One H200: v5 gpt2-small, the parent (SwiGLU's input gradient reading its inputs twice) and this
# commit, built side by side, benched alternately in one job.
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
N=$(nproc); T0=$(date +%s)
L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$N" --target tiny_llama >/tmp/build.log 2>&1) || { tail -30 /tmp/build.log; exit 1; }
(cmake -S .dev/base -B /tmp/base -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg2.log 2>&1 && cmake --build /tmp/base -j "$N" --target tiny_llama >/tmp/build2.log 2>&1) || { tail -30 /tmp/build2.log; exit 1; }
echo "built $(( $(date +%s) - T0 )) s"
for rep in 1 2; do
  for who in base new; do
    B=build/tiny_llama; [ $who = base ] && B=/tmp/base/tiny_llama
    timeout 60 $B bench --device cuda --levels v5 --precisions bf16 --timing-warmup-steps 5 --steps 10 --repeats 3 --preset gpt2-small --json $L/${who}_$rep.json > $L/${who}_$rep.log 2>&1
    echo "$who $rep: $(grep -E "^v5" $L/${who}_$rep.log)"
  done
done
echo "== done $(( $(date +%s) - T0 )) s"
