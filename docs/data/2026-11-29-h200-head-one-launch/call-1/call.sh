#!/usr/bin/env bash
# One H200: the head's loss and FP8 gradient in one launch (TT_CEFUSE=lag, experiment) against
# the two passes: the bytes test at several lags, v5 steps, profiles.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 16 --target tiny_llama gpu_tests >/tmp/build.log 2>&1) || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
echo "built $(el) s"
for lag in off 1 2 4; do envs=(); [ $lag != off ] && envs=(TT_CEFUSE=$lag)
  env "${envs[@]}" timeout 120 build/tests/gpu_tests --gtest_filter='*CrossEntropyGradientMadeInFp8*' > $L/test_$lag.log 2>&1; echo "bytes test lag $lag rc $?: $(grep -cE '^\[       OK' $L/test_$lag.log) ok"; grep -E "Failure|Expected|Which is" $L/test_$lag.log | head -6
done
TT_CEFUSE=2 timeout 200 build/tests/gpu_tests --gtest_filter='Fp8Model.*' > $L/fp8model_2.log 2>&1; echo "Fp8Model with lag 2 rc $?: $(grep -cE '^\[       OK' $L/fp8model_2.log) ok"; grep -E "^\[  FAILED" $L/fp8model_2.log | head
echo "== steps $(el) s"
for rep in 1 2; do for p in gpt2-small medium; do for lag in off 1 2 4; do envs=(); [ $lag != off ] && envs=(TT_CEFUSE=$lag)
  n=${p}_${lag}_$rep
  env "${envs[@]}" timeout 60 build/tiny_llama bench --device cuda --levels v5 --precisions bf16 --timing-warmup-steps 5 --steps 10 --repeats 3 --preset $p --json $L/$n.json > $L/$n.log 2>&1 || tail -3 $L/$n.log
  echo "$n: $(grep -E '^v5' $L/$n.log | awk '{print $5, $6, "fwd", $9, "bwd", $10}')"
done; done; done
echo "== profiles $(el) s"
for lag in off 1 2 4; do envs=(); [ $lag != off ] && envs=(TT_CEFUSE=$lag)
  env "${envs[@]}" timeout 60 build/tiny_llama --device cuda --use-amp --version v5 --preset gpt2-small --num-steps 12 --timing-warmup-steps 6 --profile-steps 3 --log-every 100 --profile $L/profile_$lag > $L/profile_$lag.log 2>&1 || tail -3 $L/profile_$lag.log
  rm -f $L/profile_$lag/trace.json
  echo "$lag: $(grep -E '^ *cross-entropy' $L/profile_$lag.log | head -1 | cut -c1-90) | $(grep -E 'cross_entropy|SoftmaxGradient' $L/profile_$lag/kernels.csv | cut -d, -f1-4 | tr '\n' ' ')"
done
TT_CEFUSE=2 timeout 200 compute-sanitizer --tool memcheck --error-exitcode 3 build/tests/gpu_tests --gtest_filter='*CrossEntropyGradientMadeInFp8*' > $L/memcheck.log 2>&1; echo "memcheck rc $?: $(grep 'ERROR SUMMARY' $L/memcheck.log | tail -1)"
echo "== done $(el) s"
