#!/usr/bin/env bash
# One H200: the grouped weight gradients in tiles of 256 rows (two pieces of 64 a warpgroup, four
# buffers) against 128 (TT_DW_ROWS=128 keeps the old tiles): bits, the kernel in the step, the step.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
git log --oneline -1 > $L/commit.txt; git status --short >> $L/commit.txt; git diff > $L/tree.diff
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 16 >/tmp/build.log 2>&1 || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"
timeout 120 build/tests/gpu_tests --gtest_filter='GpuWeightGradients.*:Fp8Model.GroupedWeightGradientsChangeNoBit:Fp8Model.WhereFp8DoesNotPayVersion5IsVersion4BitForBit:Fp8Model.Version6TracksVersion5AndRepeatsItsBits:GpuModel.*v6*' > $L/tests.log 2>&1; echo "tests rc $? $(el) s"; grep -E "^\[  (PASSED|FAILED) |Failure" $L/tests.log | head
B="build/tiny_llama bench --device cuda --levels v6 --precisions bf16 --repeats 3"
for R in 1 2 3; do
  for W in 128 256; do TT_DW_ROWS=$W timeout 60 $B --batch-sizes 8 --seq-lens 128 > $L/b128_${W}_$R.log 2>&1; done
  echo "8x128 round $R: 128 $(grep -E '^v6 ' $L/b128_128_$R.log | awk '{print $5}') 256 $(grep -E '^v6 ' $L/b128_256_$R.log | awk '{print $5}')"
done
for R in 1 2; do
  for W in 128 256; do TT_DW_ROWS=$W timeout 60 $B --batch-sizes 8 --seq-lens 256 > $L/b256_${W}_$R.log 2>&1; done
  echo "8x256 round $R: 128 $(grep -E '^v6 ' $L/b256_128_$R.log | awk '{print $5}') 256 $(grep -E '^v6 ' $L/b256_256_$R.log | awk '{print $5}')"
done
for W in 128 256; do
  TT_DW_ROWS=$W timeout 60 build/tiny_llama --device cuda --version v6 --use-amp --seq-len 128 --num-steps 15 --timing-warmup-steps 10 --profile-steps 3 --profile $L/prof_$W > $L/prof_$W.log 2>&1
  echo "profile $W: $(grep -E '= .* busy' $L/prof_$W.log | head -1)"; grep grouped_gemm_dw $L/prof_$W/kernels.csv | head -2
  gzip -f $L/prof_$W/trace.json 2>/dev/null
done
echo "== done $(el) s"
