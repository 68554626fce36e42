#!/usr/bin/env bash
# Two H200s, GPU 0 only (for the 32 cores that build): version 6 against v4, v5 and PyTorch's strongest at the default shape; the attention's
# kernel rows; then RoPE in the QKV product with tiles of 128 and 64 columns, 4 and 8 buffers.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 32 --target tiny_llama gpu_tests >/tmp/build.log 2>&1) || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"; nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
timeout 90 build/tests/gpu_tests --gtest_filter='GpuKernelCheck.*:*GpuModel*v6_bf16*' > $L/v6-tests.log 2>&1; echo "v6 tests rc $? $(el) s"; grep -E "^\[  (PASSED|FAILED) |Failure|FAILED  \]" $L/v6-tests.log | head
PYTHONUNBUFFERED=1 timeout 150 python3 tools/pytorch_reference.py --modes compile+graph --precisions bf16 --batch-sizes 8 --seq-lens 128 --json $L/pytorch.json > $L/pytorch.log 2>&1; echo "pytorch rc $? $(el) s"; tail -3 $L/pytorch.log
for rep in 1 2; do
  timeout 60 build/tiny_llama bench --device cuda --levels v4,v5,v6 --precisions bf16 --batch-sizes 8 --seq-lens 128 --repeats 3 --pytorch $L/pytorch.json --json $L/ladder_$rep.json > $L/ladder_$rep.log 2>&1; echo "ladder $rep rc $?"; grep -E "^v[0-9] |Ladder|batch 8 seq 128" $L/ladder_$rep.log
done
timeout 60 build/tiny_llama kernels --ops attention --levels v5,v6 --seq-lens 1024 > $L/kernels_attention.log 2>&1; echo "kernels rc $?"; grep -E "^attention" $L/kernels_attention.log
timeout 40 build/tiny_llama --device cuda --version v6 --use-amp --seq-len 128 --num-steps 15 --timing-warmup-steps 10 --profile-steps 3 --profile $L/profile_v6 > $L/profile_v6.log 2>&1; echo "profile rc $?"; grep -E "busy|Attention|Products" $L/profile_v6.log | head -5
echo "rope variants at $(el) s"
for V in "128 4" "64 4" "64 8"; do
  set -- $V; tag=${1}x$2
  sed -i -E "s/constexpr int kN = [0-9]+, kBuffers = [0-9]+;/constexpr int kN = $1, kBuffers = $2;/" src/ops/rope_product.cu
  cmake --build build -j 32 --target tiny_llama gpu_tests >/tmp/build_$tag.log 2>&1 || { tail -20 /tmp/build_$tag.log; continue; }
  timeout 60 build/tests/gpu_tests --gtest_filter='*GpuRopeProduct*:Fp8Model.RopeInQkv*' > $L/rope_tests_$tag.log 2>&1; echo "$tag tests rc $? $(grep -cE 'OK \]' $L/rope_tests_$tag.log) ok $(grep -m3 -E 'Failure|Expected|Which is' $L/rope_tests_$tag.log | tr '\n' ' ')"
  timeout 40 build/tiny_llama --device cuda --version v6 --use-amp --enable-rope-in-qkv-product --seq-len 128 --num-steps 15 --timing-warmup-steps 10 --profile-steps 3 --profile $L/profile_rope_$tag > $L/profile_rope_$tag.log 2>&1
  echo "$tag kernel: $(grep -E 'qkv_rope_kernel' $L/profile_rope_$tag/kernels.csv | head -1)"
  [ $tag = 128x4 ] && continue  # its kernel's time only: the step measured before (8.5 us, 1.138 against 1.130 ms)
  for rep in 1 2; do
    timeout 40 build/tiny_llama bench --device cuda --levels v6 --precisions bf16 --batch-sizes 8 --seq-lens 128 --repeats 3 --json $L/rope_off_${tag}_$rep.json > $L/rope_off_${tag}_$rep.log 2>&1
    timeout 40 build/tiny_llama bench --device cuda --levels v6 --precisions bf16 --batch-sizes 8 --seq-lens 128 --repeats 3 --enable-rope-in-qkv-product --json $L/rope_on_${tag}_$rep.json > $L/rope_on_${tag}_$rep.log 2>&1
    echo "$tag $rep: off $(grep -E '^v6 ' $L/rope_off_${tag}_$rep.log | awk '{print $5, $6}') on $(grep -E '^v6 ' $L/rope_on_${tag}_$rep.log | awk '{print $5, $6}')"
  done
  echo "at $(el) s"
done
grep -E "nvjet|rope_kernel|rope_forward" $L/profile_v6/kernels.csv | head -4
echo "== done $(el) s"
