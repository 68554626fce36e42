#!/usr/bin/env bash
# One H200: the second product's loads taken apart (.dev/cdown/probe.cu): the fixed cost of a launch
# of pairs, L2 promotion of the maps, K 1024/2048/4096; then ncu of cuBLAS's kernel and of ours.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
nvcc -std=c++17 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -O3 -Isrc -diag-suppress 177 .dev/cdown/probe.cu -o /tmp/probe -lcublas || exit 1
for run in 1 2; do for k in 2048 1024 4096; do timeout 60 /tmp/probe $k > $L/probe_k${k}_$run.log 2>&1; done; done
cat $L/probe_k2048_1.log | cut -c1-150; grep -h "cublasGemmEx\|empty\|promotion" $L/probe_k1024_1.log $L/probe_k4096_1.log | cut -c1-150
echo "probes $(el) s"
M="gpu__time_duration.sum,lts__t_bytes.sum.per_second,lts__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,l1tex__m_xbar2l1tex_read_bytes.sum,l1tex__m_xbar2l1tex_read_bytes.sum.per_second,lts__t_sectors_srcunit_tex.sum,lts__d_sectors_fill_sysmem.sum,dram__bytes_read.sum,sm__cycles_active.avg,smsp__cycles_active.avg,lts__average_gcomp_input_sector_success_rate.pct,lts__t_requests_srcunit_tex.sum,launch__cluster_dim_x,launch__grid_size,launch__block_size,launch__shared_mem_per_block_dynamic,launch__registers_per_thread"
S="--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats"
prof() { timeout 100 ncu --cache-control none --clock-control none -k regex:"$2" --launch-skip $3 --launch-count 1 $S --metrics $M /tmp/probe 2048 short > $L/ncu_$1.log 2>&1; echo "ncu $1 rc $? $(el) s"; }
prof cublas nvjet 0; prof loads_none "^pair_kernel" 0; prof product_none "^pair_kernel" 16; prof loads_256 "^pair_kernel" 64; prof product_256 "^pair_kernel" 80
echo "== done $(el) s"
