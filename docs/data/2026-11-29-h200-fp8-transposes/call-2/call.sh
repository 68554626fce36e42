#!/usr/bin/env bash
# One H200: this tree (the norm's and the attention's FP8 transposes in 4 x 4 blocks through
# store_transposed; the tiled pass's own order through store_transposed_4x4; SwiGLU's sigmoid from
# __expf and __fdividef) against head c949645 (.dev/c949645.tgz): kernel rows and steps, then
# compute-sanitizer on the FP8 tests and the GPU tests the change reaches.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
mkdir -p /tmp/head && tar xzf .dev/c949645.tgz -C /tmp/head
(cmake -S /tmp/head -B /tmp/head/build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfgh.log 2>&1 && cmake --build /tmp/head/build -j 4 --target tiny_llama >/tmp/buildh.log 2>&1) & HP=$!
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 12 >/tmp/build.log 2>&1) || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
wait $HP || { grep -B2 -A10 error /tmp/buildh.log | head -20; exit 1; }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader; echo "built $(el) s"
H=/tmp/head/build/tiny_llama; N=build/tiny_llama
K="--levels v5 --precision bf16 --batch-size 16 --seq-len 1024 --hidden-dim 768 --num-heads 12 --num-kv-heads 12 --intermediate-size 2048 --vocab-size 50257 --seq-lens 1024 --long-batch 16 --ops rmsnorm attention quantize swiglu rope cross_entropy"
for b in head new; do bin=$N; [ $b = head ] && bin=$H
  timeout 90 $bin kernels $K > $L/k_$b.log 2>&1 || tail -3 $L/k_$b.log
  echo "$b: $(awk '/^(rmsnorm|attention|quantize|swiglu|rope|cross_entropy) +(fwd|bwd)/{k=$1" "$2; if(!(k in s)){s[k]=$6; o[++n]=k}} END{for(i=1;i<=n;i++) printf "%s %s | ", o[i], s[o[i]]}' $L/k_$b.log)"
done
echo "== kernels $(el) s"
for r in 1; do for b in head new; do bin=$N; [ $b = head ] && bin=$H
  n=bench_${b}_$r
  timeout 60 $bin bench --device cuda --levels v5 --precisions bf16 --timing-warmup-steps 5 --steps 10 --repeats 3 --preset gpt2-small --json $L/$n.json > $L/$n.log 2>&1 || tail -3 $L/$n.log
  echo "$n: $(grep -E '^v5' $L/$n.log | awk '{print $5, $6, "fwd", $9, "bwd", $10, "opt", $11}')"
done; done
echo "== bench $(el) s"
F='Formats/Fp8Quantize.*MadeInFp8*:Formats/Fp8Quantize.CurrentScaling*:Formats/Fp8Quantize.AllAtOnce*'
for tool in memcheck racecheck; do
  timeout 100 compute-sanitizer --tool $tool build/tests/gpu_tests --gtest_filter="$F" > $L/$tool.log 2>&1
  echo "$tool rc $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $L/$tool.log | tail -1) | $(grep -cE '^\[       OK' $L/$tool.log) ok"
done
echo "== sanitizers $(el) s"
cd build
R='Fp8|Formats|GpuOpCase.*(swiglu|rmsnorm_v5|attention_v5|quantize|rope_v5)|MatchesTheReference/cross_entropy_v5|GpuKernelCheck|LossAndEveryGradientMatchTheCpu|TwoRunsAreBitIdentical'
ctest -L "^gpu$" -R "$R" -N | tail -1
t=$(( 585 - $(( $(date +%s) - T0 )) ))
timeout $t ctest -L "^gpu$" -R "$R" -j 10 --timeout 200 --output-on-failure > $L/gpu-tests.log 2>&1; echo "ctest rc $?"
grep -E "tests passed|tests failed|Total Test time|\*\*\*Failed|\(Failed\)|\(Timeout\)" $L/gpu-tests.log | head -20
sed -nE 's/.*Test +#[0-9]+: ([^ ]+) \.+ +Passed.*/\1/p' $L/gpu-tests.log > $L/passed.txt
ctest -L "^gpu$" -R "$R" -N | sed -nE 's/^ *Test +#[0-9]+: (.*)$/\1/p' > $L/selected.txt
echo "passed: $(wc -l < $L/passed.txt) of $(wc -l < $L/selected.txt); done $(el) s"
