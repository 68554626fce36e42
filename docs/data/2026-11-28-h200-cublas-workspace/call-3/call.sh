#!/usr/bin/env bash
# Call 9 (one GPU): products-without-workspace: its tests, then v5 gpt2-small with it (the preset)
# and without it (--disable-products-without-workspace), alternating, with the memsets counted.
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
N=$(nproc); T0=$(date +%s)
L=$OUT/logs; mkdir -p $L
trap 'rm -f $L/*/trace.json; tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$N" --target tiny_llama gpu_tests >/tmp/build.log 2>&1) || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
echo "built $(( $(date +%s) - T0 )) s"
timeout 60 build/tests/gpu_tests --gtest_filter='Plans/GpuModel.*products_without_workspace*:RealSizes.Gpt2SmallMatchesTheCpu:Fp8Model.AResumedRunContinuesBitForBit:Fp8Model.WhereFp8*' > $L/tests.log 2>&1; echo "tests rc $? $(grep -E '^\[  PASSED' $L/tests.log) $(grep -c '^\[       OK' $L/tests.log) ok"; grep -E "FAILED|Failure" $L/tests.log | head
step() { timeout 40 build/tiny_llama --device cuda --use-amp --log-every 1000 ${@:2} > $L/$1.log 2>&1 || tail -3 $L/$1.log
  echo "$1: $(grep -E 'Average batch time' $L/$1.log | sed 's/Average batch time: //') loss $(grep 'Final loss' $L/$1.log | sed 's/Final loss: //')"; }
for rep in 1 2; do
  step with_$rep --version v5 --preset gpt2-small --num-steps 40 --timing-warmup-steps 10
  step without_$rep --version v5 --preset gpt2-small --num-steps 40 --timing-warmup-steps 10 --disable-products-without-workspace
done
grep -m1 -i "products-without\|switches\|Plan" $L/with_1.log | cut -c1-300
echo "== done $(( $(date +%s) - T0 )) s"
