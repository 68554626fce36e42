#!/usr/bin/env bash
# One H200: bf16 products through cuBLASLt's timed choice (TT_TBF16, experiment): the bytes test,
# v4 steps alternating off/on at default, gpt2-small, medium; v5 default off/on.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 16 --target tiny_llama gpu_tests >/tmp/build.log 2>&1) || { grep -B2 -A10 error /tmp/build.log | head -40; tail -20 /tmp/cfg.log; exit 1; }
echo "built $(el) s"
timeout 120 build/tests/gpu_tests --gtest_filter='TimedProducts.*:Fp8Gemm.EveryTimed*' > $L/candidates.log 2>&1; grep -E "timed|OK \]|FAILED|differs" $L/candidates.log | head -60
echo "== steps $(el) s"
for rep in 1 2; do for p in default gpt2-small medium; do for tree in off on; do
  pre="--preset $p"; [ $p = default ] && pre=""
  n=v4_${p}_${tree}_$rep
  if [ $tree = on ]; then export TT_TBF16=1; else unset TT_TBF16; fi
  timeout 90 build/tiny_llama bench --device cuda --levels v4 --precisions bf16 --timing-warmup-steps 5 --steps 20 --repeats 3 $pre --json $L/$n.json > $L/$n.log 2>&1 || tail -3 $L/$n.log
  echo "$n: $(grep -E '^v4' $L/$n.log | awk '{print $5, $6}')"
done; done; done
for rep in 1 2; do for tree in off on; do
  n=v5_default_${tree}_$rep
  if [ $tree = on ]; then export TT_TBF16=1; else unset TT_TBF16; fi
  timeout 90 build/tiny_llama bench --device cuda --levels v5 --precisions bf16 --timing-warmup-steps 5 --steps 20 --repeats 3 --json $L/$n.json > $L/$n.log 2>&1 || tail -3 $L/$n.log
  echo "$n: $(grep -E '^v5' $L/$n.log | awk '{print $5, $6}')"
done; done
unset TT_TBF16
echo "== done $(el) s"
