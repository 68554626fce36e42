#!/usr/bin/env bash
# One H200: split-K headroom for the default shape's bf16 products (.dev/splitk/splitk.cu).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
mkdir -p $OUT
/usr/local/cuda/bin/nvcc -std=c++17 -O2 -arch=sm_90a -o /tmp/splitk .dev/splitk/enum.cu -lcublasLt -lcublas || exit 1
timeout 280 /tmp/splitk > $OUT/enum.log 2>&1; echo "rc $?"
grep -E "^==|^   " $OUT/enum.log
