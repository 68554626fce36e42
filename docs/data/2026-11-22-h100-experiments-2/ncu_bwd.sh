#!/usr/bin/env bash
# Nsight Compute on the flash attention backward kernels at B8 T8192. Run from anywhere in the
# repository, on the GPU machine, after a build (build/tiny_llama), with OUT set to a folder.
cd "$(dirname "$0")/../../.."  # the repository root
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
timeout 400 ncu --clock-control none --kernel-name "regex:flash_backward_(dkdv|dq)_kernel" --launch-count 2 \
  --section SpeedOfLight --section ComputeWorkloadAnalysis --section Occupancy --section LaunchStats \
  --section WarpStateStats --section SchedulerStats --section InstructionStats --section MemoryWorkloadAnalysis \
  -f -o $OUT/bwd_b8_t8192 build/tiny_llama kernels --impl v3 --batch-size 8 --seq-len 8192 --seq-lens 1024 \
  --long-batch 1 --warmup 1 --repeats 1 > $OUT/ncu_run.log 2>&1
echo "ncu rc=$?"; tail -3 $OUT/ncu_run.log
ncu --import $OUT/bwd_b8_t8192.ncu-rep --page details > $OUT/ncu_bwd_b8_t8192.txt 2>&1
grep -E "flash_backward|Duration|Registers Per|Achieved Occupancy|Issue Slots Busy|Warp Cycles Per Issued|No Eligible|Compute \(SM\) Throughput|Memory Throughput|Executed Ipc A|Theoretical Occ|Stall|L2 Hit|L1/TEX Hit" $OUT/ncu_bwd_b8_t8192.txt | head -60
