#!/usr/bin/env bash
# The quantizing kernel's loads ahead (work tree) against its parent (.dev/base, HEAD): tests,
# sanitizer, kernels bench and v5 steps alternating, one job.
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
N=$(nproc); T0=$(date +%s)
L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$N" --target tiny_llama gpu_tests >/tmp/build.log 2>&1) &
(cd .dev/base && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg0.log 2>&1 && cmake --build build -j "$N" --target tiny_llama >/tmp/build0.log 2>&1) &
wait
[ -x build/tiny_llama ] && [ -x .dev/base/build/tiny_llama ] || { grep -B2 -A10 error /tmp/build.log /tmp/build0.log | head -40; exit 1; }
echo "built $(( $(date +%s) - T0 )) s"
timeout 200 build/tests/gpu_tests --gtest_filter='Formats/Fp8Quantize.*:Fp8Model.*:GpuKernelCheck*:*GpuProfile*:*Norm*Fp8*:*Fp8*Norm*' > $L/tests.log 2>&1; echo "tests rc $? $(tail -1 $L/tests.log)"; grep -E "FAILED|Failure" $L/tests.log | head
timeout 200 compute-sanitizer --tool racecheck --error-exitcode 9 build/tests/gpu_tests --gtest_filter='Formats/Fp8Quantize.*' > $L/racecheck.log 2>&1; echo "racecheck rc $? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' $L/racecheck.log | tail -1)"
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 build/tests/gpu_tests --gtest_filter='Formats/Fp8Quantize.*' > $L/memcheck.log 2>&1; echo "memcheck rc $? $(grep -E 'ERROR SUMMARY' $L/memcheck.log | tail -1)"
G="--precision bf16 --batch-size 16 --seq-len 1024 --hidden-dim 768 --num-heads 12 --num-kv-heads 12 --intermediate-size 2048 --vocab-size 50257 --seq-lens 1024 --long-batch 16"
for b in base new base new; do
  bin=build/tiny_llama; [ $b = base ] && bin=.dev/base/build/tiny_llama
  timeout 90 $bin kernels --levels v5 $G --ops swiglu,quantize,rope,cross_entropy,rmsnorm > $L/kernels_$b.log 2>&1; echo "kernels $b rc $?"
  grep -E "^(swiglu|quantize|rope|cross_entropy|rmsnorm) " $L/kernels_$b.log | sort -u | awk '{print $1,$2,$5,$6,$7,$8}' | tr '\n' ';'; echo
done
for rep in 1 2 3; do for b in base new; do
  bin=build/tiny_llama; [ $b = base ] && bin=.dev/base/build/tiny_llama
  timeout 60 $bin --device cuda --version v5 --use-amp --preset gpt2-small --num-steps 50 --timing-warmup-steps 10 --log-every 100 > $L/step_${b}_$rep.log 2>&1
  echo "$b rep $rep: $(grep -E 'Average batch time' $L/step_${b}_$rep.log) loss $(grep 'Final loss' $L/step_${b}_$rep.log)"
done; done
for b in base new; do
  bin=build/tiny_llama; [ $b = base ] && bin=.dev/base/build/tiny_llama
  timeout 60 $bin --device cuda --version v5 --use-amp --preset medium --num-steps 50 --timing-warmup-steps 10 --log-every 100 > $L/medium_${b}.log 2>&1
  echo "medium $b: $(grep -E 'Average batch time' $L/medium_${b}.log) loss $(grep 'Final loss' $L/medium_${b}.log)"
done
timeout 100 build/tiny_llama --device cuda --use-amp --version v5 --preset gpt2-small --num-steps 9 --timing-warmup-steps 6 --profile-steps 2 --log-every 100 --profile $L/prof > $L/profile_v5_gpt2.log 2>&1; rm -f $L/prof/trace.json
grep -E " busy \+ " $L/profile_v5_gpt2.log; sed -n "/Kernel time by family/,/the rows/p" $L/profile_v5_gpt2.log
echo "== done $(( $(date +%s) - T0 )) s"
