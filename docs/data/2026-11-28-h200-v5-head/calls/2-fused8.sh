#!/usr/bin/env bash
# Device call 2: build, the new FP8 tests, check rows, ablation and bench at gpt2-small and medium,
# the profile, compute-sanitizer on v5 with every product in FP8.
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
N=$(nproc)
T0=$(date +%s)
echo "== build $(date +%T)"
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$N" --target tiny_llama gpu_tests >/tmp/build.log 2>&1) || { tail -30 /tmp/cfg.log /tmp/build.log; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== tests $(date +%T)"
timeout 120 build/tests/gpu_tests --gtest_filter='Fp8Quantize.*:Fp8Model.Fused*:Fp8Model.AResumed*:*GpuOpCase*rope*:*GpuOpCase*cross_entropy*' > $OUT/tests.log 2>&1; echo "rc $?"
grep -E "PASSED|FAILED|Failure|Expected|Which is|actual|rror" $OUT/tests.log | head -30
echo "== kernels --check $(date +%T)"
timeout 60 build/tiny_llama kernels --check --levels v3,v5 > $OUT/kcheck.log 2>&1; echo "rc $?"; grep -E "^rope|^cross|rows match" $OUT/kcheck.log
echo "== ablate gpt2-small $(date +%T)"
timeout 150 build/tiny_llama ablate --device cuda --version v5 --use-amp --preset gpt2-small --num-steps 20 --csv $OUT/ablate_gpt2.csv > $OUT/ablate_gpt2.log 2>&1; echo "rc $?"; grep -vE "^\s*$" $OUT/ablate_gpt2.log | tail -28
echo "== bench $(date +%T)"
for p in gpt2-small medium; do
timeout 100 build/tiny_llama bench --device cuda --levels v4,v5 --precisions bf16 --timing-warmup-steps 5 --steps 10 --repeats 3 --preset $p --json $OUT/bench_$p.json > $OUT/bench_$p.log 2>&1; echo "rc $?"; grep -E "^v[0-9]|rror" $OUT/bench_$p.log
done
echo "== profile $(date +%T)"
timeout 60 build/tiny_llama --device cuda --version v5 --use-amp --preset gpt2-small --num-steps 9 --timing-warmup-steps 6 \
  --profile-steps 2 --log-every 100 --profile $OUT/profile_v5_gpt2 --flops-profile > $OUT/profile_v5_gpt2.log 2>&1; echo "rc $?"
sed -n "/Kernel launches/,/Model FLOPs/p" $OUT/profile_v5_gpt2.log | head -60; rm -f $OUT/profile_v5_gpt2/trace.json
echo "== sanitizer $(date +%T)"
small="--batch-size 2 --seq-len 64 --hidden-dim 128 --num-heads 2 --num-layers 2 --num-steps 2 --version v5 --use-amp --enable-fp8-every-shape --device cuda"
for tool in memcheck racecheck; do
  left=$(( 590 - ($(date +%s) - T0) )); [ $left -lt 20 ] && { echo "no time for $tool"; break; }
  timeout $left compute-sanitizer --tool $tool --error-exitcode 3 build/tiny_llama $small > $OUT/sanitizer_$tool.log 2>&1; echo "$tool rc $?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|FP8" $OUT/sanitizer_$tool.log | head -3
done
echo "== done $(date +%T)"
