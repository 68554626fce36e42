#!/usr/bin/env bash
# Two H200s (GPU 0 for the one-GPU parts): version 6 with RoPE in the QKV product (tiles of 64
# columns, 8 buffers) in its preset. Its tests, sanitizers, the ladder against PyTorch, a profile,
# then every version on two GPUs.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 32 --target tiny_llama gpu_tests multigpu_tests >/tmp/build.log 2>&1) || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"; git rev-parse --short HEAD; git status --short | grep -v "^??" | head
export CUDA_VISIBLE_DEVICES=0
timeout 150 build/tests/gpu_tests --gtest_filter='*GpuRopeProduct*:Fp8Model.*:*GpuProfile*/6:GpuKernelCheck.*:*GpuOpCase*attention_v6*:*GpuModel*v6_bf16*:*GpuAttention*OneBlock*' > $L/v6-tests.log 2>&1; echo "tests rc $? $(el) s"; grep -E "^\[  (PASSED|FAILED) |Failure|FAILED  \]" $L/v6-tests.log | head
for tool in memcheck racecheck; do
  timeout 90 compute-sanitizer --tool $tool --error-exitcode 3 build/tiny_llama --device cuda --version v6 --use-amp --num-steps 2 --batch-size 2 --seq-len 128 --log-every 1 > $L/san_${tool}.log 2>&1
  echo "$tool rc $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $L/san_${tool}.log | tail -1) $(el) s"
done
grep -E "^(Attention|Products)" $L/san_memcheck.log
PYTHONUNBUFFERED=1 timeout 150 python3 tools/pytorch_reference.py --modes compile+graph --precisions bf16 --batch-sizes 8 --seq-lens 128 --json $L/pytorch.json > $L/pytorch.log 2>&1; echo "pytorch rc $? $(el) s"; tail -1 $L/pytorch.log
for rep in 1 2; do
  timeout 60 build/tiny_llama bench --device cuda --levels v4,v5,v6 --precisions bf16 --batch-sizes 8 --seq-lens 128 --repeats 3 --pytorch $L/pytorch.json --json $L/ladder_$rep.json > $L/ladder_$rep.log 2>&1; echo "ladder $rep rc $?"; grep -E "^v[0-9] |batch 8 seq 128:" $L/ladder_$rep.log
done
timeout 40 build/tiny_llama --device cuda --version v6 --use-amp --seq-len 128 --num-steps 15 --timing-warmup-steps 10 --profile-steps 3 --profile $L/profile_v6 > $L/profile_v6.log 2>&1; echo "profile rc $?"; grep -E "busy|^Attention|^Products" $L/profile_v6.log | head -5
grep -E "qkv_rope|flash_backward|nvjet|rope_kernel" $L/profile_v6/kernels.csv | head -8
unset CUDA_VISIBLE_DEVICES
echo "multigpu at $(el) s"
timeout 120 build/tests/multigpu_tests --gtest_filter='*EveryVersion*/2Gpus' > $L/multigpu.log 2>&1; echo "multigpu rc $? $(el) s"; grep -E "^\[  (PASSED|FAILED) |Failure|FAILED  \]" $L/multigpu.log | head
echo "== done $(el) s"
