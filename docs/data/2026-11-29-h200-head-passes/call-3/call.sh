#!/usr/bin/env bash
# One H200: this tree (the head's passes with 32-bit index fast paths, ex2.approx.ftz and the loss
# pass's product rounded alone; the tiled FP8 pass's transpose in 4 x 4 byte blocks) against HEAD
# 3649828 (.dev/head.tgz): sanitizers, bench, then the GPU tests the change reaches.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
mkdir -p /tmp/head && tar xzf .dev/head.tgz -C /tmp/head
(cmake -S /tmp/head -B /tmp/head/build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfgh.log 2>&1 && cmake --build /tmp/head/build -j 5 --target tiny_llama >/tmp/buildh.log 2>&1) & HP=$!
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 12 >/tmp/build.log 2>&1) || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
wait $HP || { grep -B2 -A10 error /tmp/buildh.log | head -20; exit 1; }
echo "built $(el) s"
F='Formats/Fp8Quantize.SwiGlu*:Formats/Fp8Quantize.Rope*:Formats/Fp8Quantize.CrossEntropy*:Formats/Fp8Quantize.CurrentScaling*:Formats/Fp8Quantize.AllAtOnce*'
for tool in memcheck racecheck; do
  timeout 100 compute-sanitizer --tool $tool build/tests/gpu_tests --gtest_filter="$F" > $L/$tool.log 2>&1
  echo "$tool rc $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $L/$tool.log | tail -1) | $(grep -cE '^\[       OK' $L/$tool.log) ok"
done
echo "== sanitizers $(el) s"
H=/tmp/head/build/tiny_llama; N=build/tiny_llama
for r in 1 2; do for p in gpt2-small medium; do for b in head new; do
  [ $p = gpt2-small ] && [ $r = 2 ] && continue
  bin=$N; [ $b = head ] && bin=$H
  n=bench_${p}_${b}_$r
  timeout 60 $bin bench --device cuda --levels v5 --precisions bf16 --timing-warmup-steps 5 --steps 10 --repeats 3 --preset $p --json $L/$n.json > $L/$n.log 2>&1 || tail -3 $L/$n.log
  echo "$n: $(grep -E '^v5' $L/$n.log | awk '{print $5, $6, "fwd", $9, "bwd", $10, "opt", $11}')"
done; done; done
echo "== bench $(el) s"
cd build
R='GpuOpCase|Fp8|FusedClassifier|GpuKernelCheck|GpuUntiedHead|VocabPadding|RealSizes|GpuLaunch|LossAndEveryGradientMatchTheCpu|TwoRunsAreBitIdentical|TwentyStepsTrackTheCpu/(v4|v3_fused_classifier|fused_classifier_chunks)_|GpuRecipe'
ctest -L "^gpu$" -R "$R" -N | tail -1
t=$(( 585 - $(( $(date +%s) - T0 )) ))
timeout $t ctest -L "^gpu$" -R "$R" -j 10 --timeout 200 --output-on-failure > $L/gpu-tests.log 2>&1; echo "ctest rc $?"
grep -E "tests passed|tests failed|Total Test time|\*\*\*Failed|\(Failed\)|\(Timeout\)" $L/gpu-tests.log | head -20
sed -nE 's/.*Test +#[0-9]+: ([^ ]+) \.+ +Passed.*/\1/p' $L/gpu-tests.log > $L/passed.txt
echo "passed: $(wc -l < $L/passed.txt); done $(el) s"
