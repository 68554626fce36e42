#!/usr/bin/env bash
# One H200: .dev/dw/dw.cu (dw.cu here), a layer's four weight gradients in one launch of our own tile kernel against cuBLAS.
set -uo pipefail
cd "$(dirname "$0")/.."
L=$OUT/logs; mkdir -p $L; trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader
for v in ${DW_VARIANTS:-"64 4" "128 4" "64 6" "128 5"}; do
  set -- ${v/_/ }
  nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -DTN=$1 -DSTAGES=$2 -o /tmp/dw_$1_$2 .dev/dw/dw.cu -lcublas -lcuda || exit 1
  timeout 60 /tmp/dw_$1_$2 2>&1 | tee $L/dw_$1_$2.log
done
