#!/usr/bin/env bash
# One H200: products-without-workspace for bf16 only (the fp32 tests, v3/v4 fp32 and its header);
# whether initcheck sees cuBLASLt's writes to a D apart from C (.dev/initcheck_probe2.cu); then the
# lane's later form (.dev/behind-late.patch, TT_DW_LATE=1): bits, and the step at three shapes.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
git log --oneline -1 > $L/commit.txt; git status --short >> $L/commit.txt
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 16 >/tmp/build.log 2>&1 || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"
timeout 200 build/tests/gpu_tests --gtest_filter='*products_without_workspace*:*v4_fp32*:*v3_fp32*:RealSizes.Gpt2SmallMatchesTheCpu' > $L/tests.log 2>&1; echo "tests rc $? $(el) s"; grep -E "^\[  (PASSED|FAILED) |Failure" $L/tests.log | head
F="build/tiny_llama bench --device cuda --precisions fp32 --levels v3,v4 --repeats 5 --batch-sizes 8 --seq-lens 128"
for R in 1 2; do timeout 90 $F > $L/fp32_$R.log 2>&1; echo "fp32 round $R: $(grep -E 'fp32 batch' $L/fp32_$R.log) $(el) s"; done
timeout 30 build/tiny_llama --device cuda --version v4 --num-steps 2 > $L/header_v4_fp32.log 2>&1; grep Products $L/header_v4_fp32.log
timeout 30 build/tiny_llama --device cuda --version v4 --use-amp --num-steps 2 > $L/header_v4_bf16.log 2>&1; grep Products $L/header_v4_bf16.log
nvcc -arch=sm_90a -O2 -o /tmp/probe2 .dev/initcheck_probe2.cu -lcublasLt && timeout 120 compute-sanitizer --tool initcheck --print-limit 4 /tmp/probe2 > $L/probe2.log 2>&1; echo "probe2 rc $? $(grep -c Uninitialized $L/probe2.log) reports $(el) s"; grep -E "sum|Uninitialized|Device Frame" $L/probe2.log | head -6
timeout 60 nsys profile -o /tmp/p2 --stats=false /tmp/probe2 > /dev/null 2>&1 && nsys stats -r cuda_gpu_kern_sum /tmp/p2.nsys-rep 2>/dev/null | grep -E "nvjet|sm90|gemm" | head -3
git apply .dev/behind-late.patch || exit 1
cmake --build build -j 16 --target tiny_llama gpu_tests >/tmp/build2.log 2>&1 || { grep -B2 -A12 "error" /tmp/build2.log | head -60; exit 1; }
echo "late built $(el) s"
timeout 150 build/tests/gpu_tests --gtest_filter='Fp8Model.WeightGradientsBehind*' > $L/tests_now.log 2>&1; echo "now rc $?"
TT_DW_LATE=1 timeout 150 build/tests/gpu_tests --gtest_filter='Fp8Model.WeightGradientsBehind*' > $L/tests_late.log 2>&1; echo "late rc $? (the same bits as without the lane) $(el) s"
B="build/tiny_llama bench --device cuda --precisions bf16 --levels v6 --repeats 5"
for S in "8 128" "8 256" "8 512"; do set -- $S
  for R in 1 2; do
    timeout 60 $B --batch-sizes $1 --seq-lens $2 > $L/now_${2}_$R.log 2>&1
    TT_DW_LATE=1 timeout 60 $B --batch-sizes $1 --seq-lens $2 > $L/late_${2}_$R.log 2>&1
    echo "$1x$2 round $R: now $(grep -E '^v6 ' $L/now_${2}_$R.log | awk '{print $5}') late $(grep -E '^v6 ' $L/late_${2}_$R.log | awk '{print $5}') $(el) s"
  done
done
echo "== done $(el) s"
