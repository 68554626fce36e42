#!/usr/bin/env bash
# One H200: prefetch-weights (v6): the model tests that run it and its bits, then v6 with and
# without it alternating, three rounds, and a profile of each.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 32 --target tiny_llama gpu_tests >/tmp/build.log 2>&1) || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"
for rep in 1 2 3; do
  line="round $rep:"
  for S in disable enable; do
    timeout 40 build/tiny_llama bench --device cuda --levels v6 --precisions bf16 --batch-sizes 8 --seq-lens 128 --repeats 3 --$S-prefetch-weights > $L/${S}_$rep.log 2>&1
    line="$line $S $(grep -E '^v6 ' $L/${S}_$rep.log | awk '{print $5, $NF}')"
  done
  echo "$line"
done
for S in disable enable; do
  timeout 30 build/tiny_llama --device cuda --version v6 --use-amp --seq-len 128 --num-steps 15 --timing-warmup-steps 10 --profile-steps 3 --profile $L/profile_$S --$S-prefetch-weights > $L/profile_$S.log 2>&1
  echo "$S: $(grep -m1 -E 'busy' $L/profile_$S.log)"; grep -E "^Products" $L/profile_$S.log | cut -c1-400
  grep -E "nvjet|flash|gated|down_gemm|rmsnorm_fused_backward|adamw" $L/profile_$S/kernels.csv | cut -d, -f1-4 | cut -c1-100
  rm -f $L/profile_$S/trace.json
done
echo "benches $(el) s"
timeout 100 build/tests/gpu_tests --gtest_filter='Fp8Model.PrefetchedWeights*:Fp8Model.Version6*:Fp8Model.RopeInQkv*:*GpuModel.*v6_bf16:GpuRopeProduct*:GpuGatedProduct*' > $L/tests.log 2>&1
echo "tests rc $? $(el) s"; grep -E "^\[ +(OK|FAILED|PASSED) |Failure|tests ran" $L/tests.log | head -20
echo "== done $(el) s"
