#!/usr/bin/env bash
# Nsight Compute on v5's memory-bound kernels at gpt2-small's shape: the head's FP8 gradient pass
# (quantize_kernel<SoftmaxGradient>), the cross-entropy's first pass, the norm's FP8 forward and
# its fused backward.
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
N=$(nproc); T0=$(date +%s)
L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$N" --target tiny_llama >/tmp/build.log 2>&1) || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
echo "built $(( $(date +%s) - T0 )) s"
G="--precision bf16 --batch-size 16 --seq-len 1024 --hidden-dim 768 --num-heads 12 --num-kv-heads 12 --intermediate-size 2048 --vocab-size 50257 --seq-lens 1024 --long-batch 16"
S="--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats --section SchedulerStats"
timeout 150 ncu --kernel-name "regex:quantize_kernel|cross_entropy_kernel" --launch-skip 2 --launch-count 4 $S \
  build/tiny_llama kernels --levels v5 $G --ops cross_entropy --warmup 1 --repeats 1 > $L/ncu_ce.log 2>&1; echo "ncu ce rc $?"
timeout 150 ncu --kernel-name "regex:rmsnorm" --launch-skip 4 --launch-count 6 $S \
  build/tiny_llama kernels --levels v5 $G --ops rmsnorm,residual_norm --warmup 1 --repeats 1 > $L/ncu_norm.log 2>&1; echo "ncu norm rc $?"
for f in ce norm; do echo "== $f"; grep -E "^  [a-z_]+.*\(|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Warp Cycles Per Issued|L2 Hit|L1/TEX Hit|Grid Size|Block Size|Issued Warp|No Eligible|Stall" $L/ncu_$f.log | head -70; done
echo "== done $(( $(date +%s) - T0 )) s"
