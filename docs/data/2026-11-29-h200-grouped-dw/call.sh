#!/usr/bin/env bash
# One H200: .dev/grouped/grouped.cu, a layer's four weight-gradient products separate against one grouped call.
set -uo pipefail
cd "$(dirname "$0")/.."
L=$OUT/logs; mkdir -p $L; trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader
nvcc -O2 -std=c++17 -arch=sm_90a -o /tmp/grouped .dev/grouped/grouped.cu -lcublas || exit 1
timeout 60 /tmp/grouped | tee $L/grouped_fp32.log; timeout 60 /tmp/grouped bf16 | tee $L/grouped_bf16.log
