#!/usr/bin/env bash
# The 16-row chunks of fp8-fused-norm-backward (this tree) against its parent (base.tgz, byte-wise
# transpose, 43-row chunks): the tests, then bench v4,v5 at gpt2-small and medium, trees
# alternating, then v5 with the switch off, then a profile of this tree.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L; N=$(nproc)
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$N" --target tiny_llama gpu_tests >/tmp/build.log 2>&1) || { grep -B2 -A10 "error" /tmp/build.log | head -60; exit 1; }
mkdir -p /tmp/base && tar xzf .dev/base.tgz -C /tmp/base && (cd /tmp/base && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg2.log 2>&1 && cmake --build build -j "$N" --target tiny_llama >/tmp/build2.log 2>&1) || { tail -30 /tmp/build2.log; exit 1; }
echo "built $(( $(date +%s) - T0 )) s"
timeout 200 build/tests/gpu_tests --gtest_filter='Formats/Fp8Quantize.Residual*:Fp8Model.Fused*:GpuKernelCheck*:*GpuOpCase*rmsnorm*:*GpuOpCase*residual*' > $L/tests.log 2>&1; echo "tests rc $?"
grep -E "^\[  PASSED|^\[  FAILED|Failure|Expected|Which is|rows match|FAILED  \]" $L/tests.log | head -20
for p in gpt2-small medium; do
  for rep in 1 2; do
    for tree in base new; do
      bin=build/tiny_llama; [ $tree = base ] && bin=/tmp/base/build/tiny_llama
      n=${p}_${rep}_$tree
      timeout 150 $bin bench --device cuda --levels v4,v5 --precisions bf16 --preset $p --timing-warmup-steps 5 --steps 10 --repeats 3 --json $L/$n.json > $L/$n.log 2>&1 || tail -5 $L/$n.log
      echo "$n: $(grep -E "^v[45]" $L/$n.log | awk '{print $1, $5}' | tr '\n' ' ')"
    done
  done
  n=${p}_off
  timeout 120 build/tiny_llama bench --device cuda --levels v5 --precisions bf16 --preset $p --timing-warmup-steps 5 --steps 10 --repeats 3 --disable-fp8-fused-norm-backward --json $L/$n.json > $L/$n.log 2>&1
  echo "$n: $(grep -E "^v5" $L/$n.log | awk '{print $1, $5}' | tr '\n' ' ')"
done
t=$(( 585 - ($(date +%s) - T0) ))
echo "== profile $(date +%T) ($t s left)"
[ $t -gt 50 ] && timeout $(( t - 15 )) build/tiny_llama --device cuda --version v5 --use-amp --preset gpt2-small --num-steps 9 --timing-warmup-steps 6 --profile-steps 2 --log-every 100 --profile $L/profile_gpt2 > $L/profile_gpt2.log 2>&1
grep -iE "rmsnorm" $L/profile_gpt2/kernels.csv 2>/dev/null | head -12
echo "== done $(date +%T)"
