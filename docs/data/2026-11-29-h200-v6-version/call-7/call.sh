#!/usr/bin/env bash
# Two H200s (GPU 0 for the one-GPU parts): norm-in-qkv-product (the attention's RMSNorm in the QKV
# product's prologue). Its tests, memcheck, the v6 step with and without it, a profile, then every
# version on two GPUs if time allows.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 32 --target tiny_llama gpu_tests multigpu_tests >/tmp/build.log 2>&1) || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"
export CUDA_VISIBLE_DEVICES=0
timeout 120 build/tests/gpu_tests --gtest_filter='*GpuRopeProduct*:Fp8Model.NormInQkv*:Fp8Model.RopeInQkv*:Fp8Model.Version6*:Fp8Model.WhereFp8DoesNotPay*:*GpuProfile*/6:*GpuModel*v6_bf16*' > $L/tests.log 2>&1; echo "tests rc $? $(el) s"; grep -E "^\[  (PASSED|FAILED) |Failure|FAILED  \]|Which is|Expected" $L/tests.log | head -20
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 3 build/tiny_llama --device cuda --version v6 --use-amp --num-steps 2 --batch-size 2 --seq-len 128 --log-every 1 > $L/san_memcheck.log 2>&1; echo "memcheck rc $? $(grep -E 'ERROR SUMMARY' $L/san_memcheck.log) $(el) s"
grep -E "^Products" $L/san_memcheck.log
for rep in 1 2; do
  timeout 40 build/tiny_llama bench --device cuda --levels v6 --precisions bf16 --batch-sizes 8 --seq-lens 128 --repeats 3 --disable-norm-in-qkv-product --json $L/off_$rep.json > $L/off_$rep.log 2>&1
  timeout 40 build/tiny_llama bench --device cuda --levels v6 --precisions bf16 --batch-sizes 8 --seq-lens 128 --repeats 3 --json $L/on_$rep.json > $L/on_$rep.log 2>&1
  echo "$rep: off $(grep -E '^v6 ' $L/off_$rep.log | awk '{print $5, $6}') on $(grep -E '^v6 ' $L/on_$rep.log | awk '{print $5, $6}')"
done
for mode in on off; do
  flag=""; [ $mode = off ] && flag="--disable-norm-in-qkv-product"
  timeout 40 build/tiny_llama --device cuda --version v6 --use-amp $flag --seq-len 128 --num-steps 15 --timing-warmup-steps 10 --profile-steps 3 --profile $L/profile_$mode > $L/profile_$mode.log 2>&1
  echo "profile $mode: $(grep -m1 -E 'busy' $L/profile_$mode.log)"; grep -E "qkv_gemm_rope|rmsnorm_fused_forward" $L/profile_$mode/kernels.csv
done
grep -E "^  (products|RMSNorm|other) " $L/profile_on.log
unset CUDA_VISIBLE_DEVICES
echo "at $(el) s"
if [ $(el) -lt 250 ]; then timeout 100 build/tests/multigpu_tests --gtest_filter='*EveryVersion*/2Gpus' > $L/multigpu.log 2>&1; echo "multigpu rc $? $(el) s"; grep -E "^\[  (PASSED|FAILED) |Failure" $L/multigpu.log | head; fi
echo "== done $(el) s"
