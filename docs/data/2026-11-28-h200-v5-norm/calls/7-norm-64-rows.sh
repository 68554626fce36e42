#!/usr/bin/env bash
# Call 7: fp8-fused-norm: its tests and the FP8 ones, the kernels' check, ablation and profile at gpt2-small.
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
N=$(nproc); T0=$(date +%s)
L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
git log --oneline -1 2>/dev/null
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$N" --target tiny_llama gpu_tests >/tmp/build.log 2>&1) || { grep -B2 -A10 "error" /tmp/build.log | head -60; exit 1; }
echo "== tests $(date +%T)"
(cd build && timeout 240 ctest -R "Fp8Quantize|Fp8Model|GpuKernelCheck|GpuAttention" -j 4 --timeout 230 --output-on-failure > $L/gpu-tests.log 2>&1); echo "rc $?"
grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)" $L/gpu-tests.log | head; grep -E "Failure|Which is|differ|expected" $L/gpu-tests.log | head -20
echo "== ablate $(date +%T)"
timeout 170 build/tiny_llama ablate --device cuda --version v5 --use-amp --preset gpt2-small --num-steps 20 --csv $L/ablate_gpt2.csv > $L/ablate_gpt2.log 2>&1; echo "rc $?"; grep -vE "^\s*$" $L/ablate_gpt2.log | tail -19
left=$(( 560 - ($(date +%s) - T0) ))
echo "== profile $(date +%T) left $left"
[ $left -gt 40 ] && { timeout $left build/tiny_llama --device cuda --version v5 --use-amp --preset gpt2-small --num-steps 9 --timing-warmup-steps 6 \
  --profile-steps 2 --log-every 100 --profile $OUT/prof --flops-profile > $L/profile_v5_gpt2.log 2>&1; echo "rc $?"; rm -rf $OUT/prof
sed -n "/Where each/,/FLOP profile/p" $L/profile_v5_gpt2.log | head -40; }
echo "== done $(date +%T)"
