#!/usr/bin/env bash
# fp8-fused-attention: its tests, kernels --check for attention, the ablation at gpt2-small,
# compute-sanitizer on a small v5 run with every product in FP8.
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
N=$(nproc); T0=$(date +%s)
L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
left() { echo $(( 590 - ($(date +%s) - T0) )); }
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$N" --target tiny_llama gpu_tests >/tmp/build.log 2>&1) || { grep -B2 -A10 "error" /tmp/build.log | head -60; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== tests $(date +%T)"
timeout 150 build/tests/gpu_tests --gtest_filter='*Fp8Quantize.Attention*:Fp8Model.Fused*:GpuAttention.*' > $L/gpu-tests.log 2>&1; echo "rc $?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|Failure" $L/gpu-tests.log | head -20
echo "== kernels --check --ops attention $(date +%T)"
timeout 150 build/tiny_llama kernels --check --ops attention > $L/kernels_check_attention.log 2>&1; echo "rc $?"; tail -6 $L/kernels_check_attention.log
echo "== ablate gpt2-small $(date +%T)"
timeout 170 build/tiny_llama ablate --device cuda --version v5 --use-amp --preset gpt2-small --num-steps 20 --csv $L/ablate_gpt2.csv > $L/ablate_gpt2.log 2>&1; echo "rc $?"; grep -E "^(v5|full|-fp8|-fused|-custom-att)" $L/ablate_gpt2.log | head -14
echo "== sanitizer $(date +%T)"
small="--batch-size 2 --seq-len 64 --hidden-dim 128 --num-heads 2 --num-layers 2 --num-steps 3 --version v5 --use-amp --enable-fp8-every-shape --device cuda"
for tool in memcheck racecheck; do
  t=$(left); [ $t -lt 25 ] && { echo "no time for $tool"; break; }
  timeout $t compute-sanitizer --tool $tool --error-exitcode 3 build/tiny_llama $small > $L/sanitizer_$tool.log 2>&1; echo "$tool rc $?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $L/sanitizer_$tool.log | head -3
done
echo "== done $(date +%T)"
