#!/usr/bin/env bash
# One H200: the block_forward op case (kernels' row, its check, its extra checks), the model test,
# the kernel check of every row; kernels' timing of the block forward; v6 with and without
# blocks-forward-in-one-launch at batches 1, 2, 4, 8 of 128 tokens; ablate with it on.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
git log --oneline -1 > $L/commit.txt; git status --short >> $L/commit.txt
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 16 --target tiny_llama gpu_tests >/tmp/build.log 2>&1 || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"
timeout 200 build/tests/gpu_tests --gtest_filter='*GpuOpCase*block_forward*:Fp8Model.BlocksForward*:GpuKernelCheck*' > $L/tests.log 2>&1; echo "tests rc $? $(el) s"; grep -E "^\[  (PASSED|FAILED) |Failure|error" $L/tests.log | head -20
timeout 120 build/tiny_llama kernels --levels v6 --check > $L/kernels_check.log 2>&1; echo "check rc $?"; grep -E "block_forward|qkv_rope" $L/kernels_check.log
timeout 120 build/tiny_llama kernels --levels v5,v6 --ops block_forward > $L/kernels.log 2>&1; echo "kernels rc $?"; grep -E "block_forward|^op|fwd" $L/kernels.log | head
timeout 120 build/tiny_llama kernels --levels v5,v6 --ops block_forward --programmatic > $L/kernels_prog.log 2>&1; grep -E "block_forward" $L/kernels_prog.log | head
B="build/tiny_llama bench --device cuda --levels v6 --precisions bf16 --batch-sizes 1,2,4,8 --seq-lens 128 --repeats 3"
for R in 1 2; do
  timeout 100 $B > $L/bench_off_$R.log 2>&1; timeout 100 $B --enable blocks-forward-in-one-launch > $L/bench_on_$R.log 2>&1
  echo "round $R $(el) s"; paste <(grep -E '^v6 ' $L/bench_off_$R.log | awk '{print $3, $5}') <(grep -E '^v6 ' $L/bench_on_$R.log | awk '{print $5}')
done
timeout 150 build/tiny_llama ablate --device cuda --version v6 --use-amp --seq-len 128 --enable blocks-forward-in-one-launch > $L/ablate.log 2>&1; echo "ablate rc $? $(el) s"; tail -16 $L/ablate.log
echo "== done $(el) s"
