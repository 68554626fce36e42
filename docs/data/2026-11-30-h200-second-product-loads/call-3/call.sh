#!/usr/bin/env bash
# One H200: our pair tile and cuBLAS's product beside AdamW-like traffic on a lower-priority stream
# (short blocks as AdamW runs now, or 132 long-lived blocks), K 1024/2048/4096 (.dev/cdown/probe.cu,
# "beside" mode); the machine code of the two pair kernels compared.
set -uo pipefail
export CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
nvcc -std=c++17 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -O3 -Isrc -diag-suppress 177 .dev/cdown/probe.cu -o /tmp/probe -lcublas || exit 1
for k in 2048 4096 1024; do timeout 120 /tmp/probe $k x beside > $L/beside_k$k.log 2>&1; echo "k$k rc $?"; grep -h "cublasGemmEx [0-9]\|streamer\|beside" $L/beside_k$k.log; done
cuobjdump -sass -fun '_Z11pair_kernelILi8ELi0ELb1ELb1ELi1EEvN2tt4cuda9SuccessorE2Op' /tmp/probe > $L/sass_pair.txt 2>&1
cuobjdump -sass -fun '_Z12pair2_kernelILi8ELi0ELi1ELi0ELb1EEvN2tt4cuda9SuccessorE2Op' /tmp/probe > $L/sass_pair2.txt 2>&1
for f in pair pair2; do echo "$f: $(grep -c '  /\*[0-9a-f]*\*/' $L/sass_$f.txt) instructions, $(grep -c 'HGMMA' $L/sass_$f.txt) HGMMA, $(grep -c 'WARPGROUP' $L/sass_$f.txt) WARPGROUP, $(grep -c 'SYNCS' $L/sass_$f.txt) SYNCS"; done
echo "== done $(el) s"
