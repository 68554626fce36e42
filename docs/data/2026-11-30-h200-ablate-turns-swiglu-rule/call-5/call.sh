#!/usr/bin/env bash
# The same H200 right after g81 (its build, the rule patch applied there): the rule at more than 512
# tokens; its tests, the header at 8 x 128 and 4 x 128.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
cmake --build build -j 16 --target tiny_llama gpu_tests >/tmp/build3.log 2>&1 || { grep -B2 -A12 "error" /tmp/build3.log | head -40; exit 1; }
timeout 40 build/tests/gpu_tests --gtest_filter='Fp8Model.WeightGradientsBehind*:Fp8Model.SwigluInDownGradient*' > $L/rule_tests.log 2>&1; echo "tests rc $?"; grep -E "^\[  (PASSED|FAILED) |Failure" $L/rule_tests.log | head -5
for N in 8 4; do timeout 15 build/tiny_llama --device cuda --version v6 --use-amp --num-steps 2 --batch-size $N > $L/header_$N.log 2>&1; grep -o "SwiGLU's backward[^;]*" $L/header_$N.log; done
