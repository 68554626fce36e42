#!/usr/bin/env bash
# Call 2: the fused attention backward: its tests, kernels rows, ablation, profile at gpt2-small.
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
N=$(nproc); T0=$(date +%s)
L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
echo "== build $(date +%T)"
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$N" --target tiny_llama gpu_tests >/tmp/build.log 2>&1) || { grep -B2 -A10 "error" /tmp/build.log | head -60; tail -30 /tmp/cfg.log; exit 1; }
echo "== tests $(date +%T)"
(cd build && timeout 200 ctest -R "GpuAttention|GpuKernelCheck|Fp8Model" -j 4 --timeout 190 --output-on-failure > $L/gpu-tests.log 2>&1); echo "rc $?"
grep -E "tests passed|tests failed|Total Test time|\*\*\*Failed|\(Failed\)|\(Timeout\)|Not Run" $L/gpu-tests.log | head -20
grep -E "Failure|Which is|error|differ|attention v5" $L/gpu-tests.log | head -30
echo "== kernels $(date +%T)"
timeout 60 build/tiny_llama kernels --impl v3,v5 --batch-size 16 --seq-len 1024 --num-heads 12 --num-kv-heads 12 --hidden-dim 768 --seq-lens 1024 --long-batch 16 > $L/kernels.log 2>&1; echo "rc $?"; grep -iE "attention|^ *op|ceiling" $L/kernels.log | head -12
echo "== ablate $(date +%T)"
timeout 170 build/tiny_llama ablate --device cuda --version v5 --use-amp --preset gpt2-small --num-steps 20 --csv $L/ablate_gpt2.csv > $L/ablate_gpt2.log 2>&1; echo "rc $?"; grep -vE "^\s*$" $L/ablate_gpt2.log | tail -16
left=$(( 570 - ($(date +%s) - T0) ))
echo "== profile $(date +%T) left $left"
[ $left -gt 40 ] && { timeout $left build/tiny_llama --device cuda --version v5 --use-amp --preset gpt2-small --num-steps 9 --timing-warmup-steps 6 \
  --profile-steps 2 --log-every 100 --profile $OUT/prof --flops-profile > $L/profile_v5_gpt2.log 2>&1; echo "rc $?"; rm -rf $OUT/prof
sed -n "/Where each/,/FLOP profile/p" $L/profile_v5_gpt2.log | head -40; }
echo "== done $(date +%T)"
