#!/usr/bin/env bash
# One H200: weight-gradients-behind (the grouped weight gradients on a lane of their own): its
# bits test, v6 with and without it alternating at 8 x 128/256/512, a profile with it; gpt2-small's
# step by step (how many warm-up steps the bench needs there); then the whole GPU suite.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
git log --oneline -1 > $L/commit.txt; git status --short >> $L/commit.txt
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 16 >/tmp/build.log 2>&1 || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"
timeout 120 build/tests/gpu_tests --gtest_filter='Fp8Model.WeightGradientsBehind*:Fp8Model.GroupedWeight*:*GpuProfile*' > $L/behind-tests.log 2>&1; echo "behind tests rc $? $(el) s"; grep -E "^\[  (PASSED|FAILED) |Failure|Expected|Which is|error" $L/behind-tests.log | head -20
B="build/tiny_llama bench --device cuda --precisions bf16 --levels v6 --repeats 5"
for S in "8 128" "8 256" "8 512"; do set -- $S
  for R in 1 2; do
    timeout 60 $B --batch-sizes $1 --seq-lens $2 > $L/on_${2}_$R.log 2>&1
    timeout 60 $B --batch-sizes $1 --seq-lens $2 --disable weight-gradients-behind > $L/off_${2}_$R.log 2>&1
    echo "$1x$2 round $R: on $(grep -E '^v6 ' $L/on_${2}_$R.log | awk '{print $5, $6}') off $(grep -E '^v6 ' $L/off_${2}_$R.log | awk '{print $5, $6}') $(el) s"
  done
done
grep -h "Products" $L/on_128_1.log | head -2
for V in on off; do
  X=""; [ $V = off ] && X="--disable weight-gradients-behind"
  timeout 60 build/tiny_llama --device cuda --use-amp --timing-warmup-steps 10 --profile-steps 3 --version v6 --seq-len 128 --num-steps 15 $X --profile $L/prof_$V > $L/prof_$V.log 2>&1
  echo "profile $V rc $? $(el) s"; grep -E "busy|Products" $L/prof_$V.log | head -3
done
timeout 90 build/tiny_llama --device cuda --use-amp --version v5 --preset gpt2-small --num-steps 45 --log-every 5 --json $L/gpt2_steps.json > $L/gpt2_steps.log 2>&1; echo "gpt2 steps rc $? $(el) s"
python3 -c "
import json; s=json.load(open('$L/gpt2_steps.json'))['steps']
print(' '.join('%.2f'%x['ms'] for x in s))"
timeout 90 build/tiny_llama bench --device cuda --levels v5 --precisions bf16 --preset gpt2-small --repeats 3 --timing-warmup-steps 20 > $L/gpt2_warm20.log 2>&1; echo "gpt2 warm-up 20: $(grep -E '^v5 ' $L/gpt2_warm20.log | awk '{print $5, $6}') $(el) s"
LEFT=$(( 575 - $(el) ))
echo "suite with ${LEFT} s"
(cd build && timeout $LEFT ctest -L "^gpu$" -j 10 --timeout 250 --output-on-failure > $L/gpu-suite.log 2>&1); echo "suite rc $? $(el) s"; grep -E "tests passed|\(Failed\)|\*\*\*Failed|Timeout" $L/gpu-suite.log | head -20
echo "== done $(el) s"
