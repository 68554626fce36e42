#!/usr/bin/env bash
# One H200 (of two): our tiles ask for their first chunks' weights before the wait on the kernel
# before them; tests + sanitizers, then the step and the kernels against the tree before.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 32 --target tiny_llama gpu_tests multigpu_tests >/tmp/build.log 2>&1) || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"; cp build/tiny_llama /tmp/tl_on
timeout 200 build/tests/gpu_tests --gtest_filter='GpuRopeProduct*:GpuGatedProduct*:Fp8Model.*:GpuKernelCheck*:*GpuModel.*v[56]_bf16' > $L/tests.log 2>&1; echo "tests rc $? $(el) s"; grep -E "^\[  (PASSED|FAILED) |Failure|tests ran" $L/tests.log | head
CUDA_VISIBLE_DEVICES=0,1 timeout 150 build/tests/multigpu_tests --gtest_filter='*EveryVersion*/2Gpus' > $L/multigpu.log 2>&1; echo "multigpu rc $? $(el) s"
timeout 120 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 /tmp/tl_on --device cuda --version v6 --use-amp --batch-size 2 --seq-len 128 --num-steps 2 > $L/san_memcheck.log 2>&1; echo "memcheck rc $? $(tail -1 $L/san_memcheck.log)"
timeout 150 /usr/local/cuda/bin/compute-sanitizer --tool racecheck /tmp/tl_on --device cuda --version v6 --use-amp --batch-size 2 --seq-len 128 --num-steps 2 > $L/san_racecheck.log 2>&1; echo "racecheck rc $? $(grep -E 'RACECHECK SUMMARY' $L/san_racecheck.log)"; grep -E "Race reported" $L/san_racecheck.log | sed 's/0x[0-9a-f]*//g' | sort | uniq -c | head -4
echo "sanitizers $(el) s"
git checkout src/ops/tile_product.cuh src/ops/rope_product.cu src/ops/gated_product.cu
cmake --build build -j 32 --target tiny_llama >/tmp/build2.log 2>&1 || { tail -20 /tmp/build2.log; exit 1; }
cp build/tiny_llama /tmp/tl_off
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
