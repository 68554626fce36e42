#!/usr/bin/env bash
# One H200 (GPU 0 of two): RoPE in the QKV product's epilogue (rope-in-qkv-product, in v5's
# preset), and the tile header shared with the gated products. Tests, sanitizers, v5 with and
# without the switch in one job, a profile.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 32 --target tiny_llama gpu_tests >/tmp/build.log 2>&1) || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"; grep -c C75 /tmp/build.log
timeout 200 build/tests/gpu_tests --gtest_filter='*GpuRopeProduct*:*GpuGatedProduct*:*Fp8Model*:*GpuAttention*:*GpuModel*:*GpuKernelCheck*:*GpuDistributed*' > $L/tests.log 2>&1; echo "tests rc $? $(el) s"; grep -E "^\[  (PASSED|FAILED) |Failure|FAILED  \]|tests ran" $L/tests.log | head -20
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 3 build/tiny_llama --device cuda --version v5 --use-amp --num-steps 2 --batch-size 2 --seq-len 128 --hidden-dim 128 --num-heads 2 --num-layers 2 --log-every 1 > $L/san_memcheck.log 2>&1
echo "memcheck rc $? $(grep -E 'ERROR SUMMARY' $L/san_memcheck.log | tail -1)"; grep -h "Products" $L/san_memcheck.log | head -1
for rep in 1 2; do
  timeout 40 build/tiny_llama bench --device cuda --levels v5 --precisions bf16 --repeats 3 --disable-rope-in-qkv-product --json $L/T128_off_$rep.json > $L/T128_off_$rep.log 2>&1
  timeout 40 build/tiny_llama bench --device cuda --levels v5 --precisions bf16 --repeats 3 --json $L/T128_on_$rep.json > $L/T128_on_$rep.log 2>&1
  echo "T128 $rep: off $(grep -E '^v5 ' $L/T128_off_$rep.log | awk '{print $5, $6}') on $(grep -E '^v5 ' $L/T128_on_$rep.log | awk '{print $5, $6}')"
done
timeout 40 build/tiny_llama --device cuda --version v5 --use-amp --seq-len 128 --num-steps 15 --timing-warmup-steps 10 --profile-steps 3 --profile $L/profile_on > $L/profile_on.log 2>&1; echo "profile rc $? $(grep -E 'busy' $L/profile_on.log | head -1)"
grep -E "qkv_rope|rope_kernel" $L/profile_on/kernels.csv
echo "== done $(el) s"
