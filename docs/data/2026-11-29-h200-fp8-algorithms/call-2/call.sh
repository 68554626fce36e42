#!/usr/bin/env bash
# One H200: fp8-timed-products (this tree, uncommitted) against a8fab82 (.dev/head.tgz): the FP8
# tests (among them the new Fp8Gemm.EveryTimedCandidateGivesTheSameBytes and
# Fp8Model.TimedProductsChangeNoBit), v5 steps alternating head / new / new without the switch,
# a profile of each tree at gpt2-small.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
mkdir -p /tmp/head && tar xzf .dev/head.tgz -C /tmp/head
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 10 --target tiny_llama gpu_tests >/tmp/build.log 2>&1) & B1=$!
(cd /tmp/head && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg2.log 2>&1 && cmake --build build -j 6 --target tiny_llama >/tmp/build2.log 2>&1) & B2=$!
wait $B1 || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
wait $B2 || { tail -30 /tmp/build2.log; exit 1; }
echo "built $(el) s"
(cd build && timeout 150 ctest -L "^gpu$" -R "Fp8" -j 6 --output-on-failure > $L/gpu-tests.log 2>&1)
grep -E "tests passed|tests failed" $L/gpu-tests.log; grep -E "\*\*\*Failed|Failure|Expected|Which is|Timeout" $L/gpu-tests.log | head -10
build/tests/gpu_tests --gtest_filter='Fp8Gemm.EveryTimedCandidateGivesTheSameBytes' > $L/candidates.log 2>&1; grep -E "timed candidates|OK|FAILED" $L/candidates.log | head -20
echo "== steps $(el) s"
for rep in 1 2; do for p in gpt2-small medium; do for tree in head new off; do
  bin=build/tiny_llama; extra=""; [ $tree = head ] && bin=/tmp/head/build/tiny_llama; [ $tree = off ] && extra="--disable-fp8-timed-products"
  n=${p}_${tree}_$rep
  timeout 60 $bin bench --device cuda --levels v5 --precisions bf16 --timing-warmup-steps 5 --steps 10 --repeats 3 --preset $p $extra --json $L/$n.json > $L/$n.log 2>&1 || tail -3 $L/$n.log
  echo "$n: $(grep -E '^v5' $L/$n.log | awk '{print $5, $6}')"
done; done; done
echo "== profiles $(el) s"
for tree in head new; do bin=build/tiny_llama; [ $tree = head ] && bin=/tmp/head/build/tiny_llama
  timeout 60 $bin --device cuda --use-amp --version v5 --preset gpt2-small --num-steps 12 --timing-warmup-steps 6 --profile-steps 3 --log-every 100 --profile $L/profile_$tree > $L/profile_$tree.log 2>&1 || tail -3 $L/profile_$tree.log
  rm -f $L/profile_$tree/trace.json
  echo "$tree: $(grep -E 'FP8 products' $L/profile_$tree.log | head -1 | cut -c1-100); $(grep -E 'Average batch time' $L/profile_$tree.log)"
done
echo "== done $(el) s"
