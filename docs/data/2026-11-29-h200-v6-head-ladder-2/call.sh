#!/usr/bin/env bash
# Two H200s: the ladder against PyTorch at HEAD with a v6 profile (GPU 0 alone), then the whole
# GPU suite (GPU 0), then every version on two ranks (both GPUs).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 32 >/tmp/build.log 2>&1) || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"
timeout 150 python3 tools/pytorch_reference.py --modes compile+graph --precisions bf16 --json $L/pytorch.json > $L/pytorch.log 2>&1; echo "pytorch rc $? $(tail -2 $L/pytorch.log | head -1)"
for rep in 1 2; do
  timeout 90 build/tiny_llama bench --device cuda --levels v4,v5,v6 --precisions bf16 --batch-sizes 8 --seq-lens 128 --repeats 3 --pytorch $L/pytorch.json --json $L/ladder_$rep.json > $L/ladder_$rep.log 2>&1
  echo "ladder $rep: $(grep -E '^v[456] ' $L/ladder_$rep.log | awk '{print $1, $5}' | tr '\n' ' ')"; grep -E "holds|BROKEN|PyTorch strongest" $L/ladder_$rep.log | tail -1
done
timeout 40 build/tiny_llama --device cuda --version v6 --use-amp --seq-len 128 --num-steps 15 --timing-warmup-steps 10 --profile-steps 3 --profile $L/profile_v6 > $L/profile_v6.log 2>&1
echo "profile: $(grep -m1 -E 'busy' $L/profile_v6.log)"; rm -f $L/profile_v6/trace.json
echo "ladder $(el) s"
(cd build && timeout 280 ctest -L "^gpu$" -j 10 --timeout 250 > $L/gpu-suite.log 2>&1); echo "suite rc $? $(el) s"; grep -E "tests passed|Failed|\*\*\*" $L/gpu-suite.log | head -20
CUDA_VISIBLE_DEVICES=0,1 timeout 150 build/tests/multigpu_tests --gtest_filter='*EveryVersion*/2Gpus' > $L/multigpu.log 2>&1; echo "multigpu rc $? $(el) s"; grep -E "^\[  (PASSED|FAILED) " $L/multigpu.log
echo "== done $(el) s"
