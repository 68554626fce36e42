#!/usr/bin/env bash
# One H200: does initcheck see what cuBLAS's bf16 products write? (.dev/initcheck_probe.cu: C by one
# cublasGemmEx, then read by a kernel; 128 x 128 x 256 and 512 x 1024 x 2048.)
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
nvcc -std=c++17 -arch=sm_90a -o /tmp/probe .dev/initcheck_probe.cu -lcublas || exit 1
/tmp/probe > $L/probe-plain.log 2>&1; echo "plain rc $?"; cat $L/probe-plain.log
timeout 120 compute-sanitizer --tool initcheck /tmp/probe > $L/probe-initcheck.log 2>&1; echo "initcheck rc $? $(el) s"
grep -E "^m |SUMMARY" $L/probe-initcheck.log; grep -E "Device Frame|^=========     at " $L/probe-initcheck.log | sed 's/+0x.*//' | sort | uniq -c | head
CUBLASLT_LOG_LEVEL=2 /tmp/probe > $L/probe-cublaslt.log 2>&1; grep -o "nvjet[A-Za-z0-9_]*\|sm90_xmma[A-Za-z0-9_]*" $L/probe-cublaslt.log | sort | uniq -c | head
echo "== done $(el) s"
