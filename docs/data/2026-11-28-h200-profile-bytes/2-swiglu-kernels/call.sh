#!/usr/bin/env bash
# One H200: FP8 tests after SwiGLU's input gradient reads its inputs once; the memory-bound kernels
# at gpt2-small's shape (kernels bench, v4 and v5); the v5 profile; ncu on the quantizing kernels.
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
N=$(nproc); T0=$(date +%s)
L=$OUT/logs; mkdir -p $L
trap 'rm -f $L/*/trace.json; tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$N" --target tiny_llama gpu_tests >/tmp/build.log 2>&1) || { grep -B2 -A10 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(( $(date +%s) - T0 )) s"
timeout 150 build/tests/gpu_tests --gtest_filter='Formats/Fp8Quantize.*:Fp8Model.*:GpuKernelCheck*' > $L/fp8-tests.log 2>&1; echo "fp8 tests rc $?"; tail -2 $L/fp8-tests.log; grep -E "FAILED|Failure" $L/fp8-tests.log | head
G="--precision bf16 --batch-size 16 --seq-len 1024 --hidden-dim 768 --num-heads 12 --num-kv-heads 12 --intermediate-size 2048 --vocab-size 50257 --seq-lens 1024 --long-batch 16"
timeout 120 build/tiny_llama kernels --levels v4,v5 $G --ops swiglu,quantize,cross_entropy,rope,rmsnorm --json $L/kernels_gpt2.json > $L/kernels_gpt2.log 2>&1; echo "kernels rc $?"
grep -E "^(op|swiglu|quantize|cross|rope|rmsnorm)|GB/s|copy" $L/kernels_gpt2.log | head -40
timeout 60 build/tiny_llama --device cuda --use-amp --version v5 --preset gpt2-small --num-steps 9 --timing-warmup-steps 6 --profile-steps 2 --log-every 100 --profile $L/profile_v5_gpt2 > $L/profile_v5_gpt2.log 2>&1
sed -n "/Kernel time by family/,/the rows/p" $L/profile_v5_gpt2.log; grep -E "SwiGluInputGradient" $L/profile_v5_gpt2.log
echo "== ncu $(date +%T)"
timeout 200 ncu --kernel-name regex:quantize --launch-skip 6 --launch-count 4 --section SpeedOfLight --section Occupancy --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats \
  build/tiny_llama kernels --levels v5 $G --ops quantize,swiglu --warmup 1 --repeats 2 > $L/ncu_quantize.log 2>&1; echo "ncu rc $?"
grep -E "quantize_kernel|DRAM Throughput|Memory Throughput|Duration|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit|Stall|L2 Hit|L1/TEX Hit|Warp Cycles Per Issued" $L/ncu_quantize.log | head -80
echo "== done $(( $(date +%s) - T0 )) s"
