#!/usr/bin/env bash
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$(nproc)" --target tiny_llama gpu_tests >/tmp/build.log 2>&1) || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"
timeout 30 build/tiny_llama --device cuda --version v5 --use-amp --enable-grouped-weight-gradients --num-steps 3 --log-every 1 > $L/run_on.log 2>&1; grep -E "Products|rror" $L/run_on.log
timeout 150 build/tests/gpu_tests --gtest_filter='GpuWeightGradients.*:Fp8Model.GroupedWeightGradientsChangeNoBit' > $L/tests.log 2>&1; echo "tests rc $?"
grep -E "^\[ +(OK|FAILED) |PASSED|FAILED|Failure|Expected|Which is|product|exception" $L/tests.log | head -20
for rep in 1 2; do for sw in off on; do f=""; [ $sw = on ] && f="--enable-grouped-weight-gradients"
  timeout 60 build/tiny_llama bench --device cuda --levels v5 --precisions bf16 --repeats 3 $f --json $L/default_${sw}_$rep.json > $L/default_${sw}_$rep.log 2>&1
  echo "$sw $rep: $(grep -E '^v5 ' $L/default_${sw}_$rep.log | awk '{print $5, $6}')"; done; done
timeout 90 build/tiny_llama --device cuda --version v5 --use-amp --num-steps 15 --timing-warmup-steps 10 --profile-steps 3 --profile $L/profile_on --enable-grouped-weight-gradients > $L/profile_on.log 2>&1; grep -E "Kernel launches|grouped_gemm" $L/profile_on.log | head -4
echo "== done $(el) s"
