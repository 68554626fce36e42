#!/usr/bin/env bash
# One H200 (of two): the tiles' clusters (x shared by two column tiles in the QKV product, W by two
# row blocks in the gated products), with and without, tests + sanitizer + profile + step.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 32 --target tiny_llama gpu_tests >/tmp/build.log 2>&1) || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"; cp build/tiny_llama /tmp/tl_on
timeout 200 build/tests/gpu_tests --gtest_filter='GpuRopeProduct*:GpuGatedProduct*:Fp8Model.*Swiglu*:Fp8Model.*Rope*:Fp8Model.Version6*:GpuKernelCheck*:GpuModel*v5_bf16*:GpuModel*v6_bf16*' > $L/tests.log 2>&1; echo "tests rc $? $(el) s"; grep -E "^\[  (PASSED|FAILED) |Failure|tests ran" $L/tests.log | head
timeout 120 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 /tmp/tl_on --device cuda --version v6 --use-amp --batch-size 2 --seq-len 128 --num-steps 2 > $L/san_memcheck.log 2>&1; echo "memcheck rc $? $(tail -1 $L/san_memcheck.log)"
timeout 150 /usr/local/cuda/bin/compute-sanitizer --tool racecheck /tmp/tl_on --device cuda --version v6 --use-amp --batch-size 2 --seq-len 128 --num-steps 2 > $L/san_racecheck.log 2>&1; echo "racecheck rc $? $(grep -E 'RACECHECK SUMMARY' $L/san_racecheck.log)"; grep -E "^=+ +(Error|Warning).*in " $L/san_racecheck.log | sed 's/.*in //' | sort | uniq -c | head
timeout 120 /usr/local/cuda/bin/compute-sanitizer --tool synccheck --error-exitcode 9 /tmp/tl_on --device cuda --version v6 --use-amp --batch-size 2 --seq-len 128 --num-steps 2 > $L/san_synccheck.log 2>&1; echo "synccheck rc $? $(tail -1 $L/san_synccheck.log)"
echo "sanitizers $(el) s"
sed -i 's/^constexpr int kPairCluster = 2;/constexpr int kPairCluster = 1;/' src/ops/rope_product.cu
sed -i 's/^constexpr int kRowCluster = 2;/constexpr int kRowCluster = 1;/' src/ops/gated_product.cu
cmake --build build -j 32 --target tiny_llama >/tmp/build2.log 2>&1 || { tail -20 /tmp/build2.log; exit 1; }
cp build/tiny_llama /tmp/tl_off; git checkout src/ops/rope_product.cu src/ops/gated_product.cu
echo "built off $(el) s"
for rep in 1 2 3; do
  for v in off on; do
    timeout 40 /tmp/tl_$v bench --device cuda --levels v6 --precisions bf16 --batch-sizes 8 --seq-lens 128 --repeats 3 --json $L/${v}_$rep.json > $L/${v}_$rep.log 2>&1
  done
  echo "$rep: off $(grep -E '^v6 ' $L/off_$rep.log | awk '{print $5, $6}') on $(grep -E '^v6 ' $L/on_$rep.log | awk '{print $5, $6}')"
done
for v in off on; do
  timeout 40 /tmp/tl_$v --device cuda --version v6 --use-amp --seq-len 128 --num-steps 15 --timing-warmup-steps 10 --profile-steps 3 --profile $L/profile_$v > $L/profile_$v.log 2>&1
  echo "profile $v: $(grep -m1 -E 'busy' $L/profile_$v.log)"; grep -E "qkv_gemm_rope|gated_gemm|down_gemm" $L/profile_$v/kernels.csv
  rm -f $L/profile_$v/trace.json
done
echo "== done $(el) s"
