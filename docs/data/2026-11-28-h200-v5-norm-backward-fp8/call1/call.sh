#!/usr/bin/env bash
# fp8-fused-norm-backward on one GPU: its tests and the FP8 suite's kernel checks, compute-sanitizer,
# then v5 with and without it at gpt2-small and medium (bench, alternating, one job).
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$(nproc)" --target tiny_llama gpu_tests >/tmp/build.log 2>&1) || { grep -B2 -A10 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(( $(date +%s) - T0 )) s"
timeout 240 build/tests/gpu_tests --gtest_filter='Formats/Fp8Quantize.*:Fp8Model.Fused*:GpuKernelCheck*:*GpuOpCase*rmsnorm*' > $L/tests.log 2>&1; echo "tests rc $?"
grep -E "^\[  PASSED|^\[  FAILED|Failure|Expected|Which is|rows match|\[       OK|FAILED  \]" $L/tests.log | head -40
small="--batch-size 2 --seq-len 64 --hidden-dim 128 --num-heads 2 --num-layers 2 --enable-fp8-every-shape"
for tool in memcheck racecheck; do
  timeout 120 compute-sanitizer --tool $tool --error-exitcode 3 build/tiny_llama --device cuda --version v5 --use-amp $small --num-steps 3 --log-every 1 > $L/sanitizer_$tool.log 2>&1
  echo "$tool: exit $?, $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $L/sanitizer_$tool.log | tail -1)"
done
echo "== A/B $(date +%T)"
for p in gpt2-small medium; do
  for rep in 1 2; do
    for v in "" "--disable-fp8-fused-norm-backward"; do
      n=${p}_${rep}${v:+_off}
      timeout 120 build/tiny_llama bench --device cuda --levels v5 --precisions bf16 --preset $p --timing-warmup-steps 5 --steps 10 --repeats 3 $v --json $L/$n.json > $L/$n.log 2>&1 || tail -5 $L/$n.log
      echo "$n: $(grep -E "^v5" $L/$n.log | head -2 | tr '\n' ' ')"
    done
  done
done
t=$(( 585 - ($(date +%s) - T0) ))
echo "== profile $(date +%T) ($t s left)"
[ $t -gt 60 ] && timeout $(( t - 20 )) build/tiny_llama --device cuda --version v5 --use-amp --preset gpt2-small --num-steps 9 --timing-warmup-steps 6 --profile-steps 2 --log-every 100 --profile $L/profile_gpt2 > $L/profile_gpt2.log 2>&1
grep -iE "rmsnorm|quantize" $L/profile_gpt2/kernels.csv 2>/dev/null | head -12
echo "== done $(date +%T)"
