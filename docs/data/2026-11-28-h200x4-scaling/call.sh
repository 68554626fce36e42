#!/usr/bin/env bash
# Session call 1 on nvidia-h200-x4: FP8 kernel tests at the Fp8Out refactor, every multigpu test,
# then 4-GPU and 2-GPU scaling benches (v4 bf16, fp32 sums, windows on).
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$(nproc)" >/tmp/build.log 2>&1) || { tail -30 /tmp/build.log; exit 1; }
echo "built $(( $(date +%s) - T0 )) s"; nvidia-smi -L | head -1
CUDA_VISIBLE_DEVICES=0 timeout 150 build/gpu_tests --gtest_filter='Formats/Fp8Quantize.*:Fp8Model.*:GpuKernelCheck*' > $L/fp8.log 2>&1; echo "fp8 rc=$?"; tail -3 $L/fp8.log; grep -E "FAILED|Failure" $L/fp8.log | head
echo "fp8 done $(( $(date +%s) - T0 )) s"
(cd build && timeout 300 ctest -L multigpu --output-on-failure > $L/multigpu.log 2>&1)
grep -E "tests passed|tests failed|Test +#" $L/multigpu.log | head -30
grep -E "Failure|Expected|Which is|actual" $L/multigpu.log | head -20
echo "multigpu done $(( $(date +%s) - T0 )) s"
for spec in "gpt2-small:--preset gpt2-small" "medium:--preset medium"; do
  n=${spec%%:*}_4
  timeout 100 build/tiny_llama bench --nproc-per-node 4 --device cuda --version v4 --use-amp ${spec#*:} --reduce-dtype fp32 --num-steps 60 --timing-warmup-steps 10 --log-every 1000 --json $L/$n.json > $L/$n.log 2>&1 || tail -5 $L/$n.log
  echo "$n: $(grep -E "^\| [0-9]" $L/$n.log | awk -F'|' '{print $2 $3 $6}' | tr '\n' ' ')  $(( $(date +%s) - T0 )) s"
done
