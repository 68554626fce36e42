#!/usr/bin/env bash
# Call 1 (one GPU): both patches applied (attn-side, ce-lanes) against .dev/base (HEAD 1164ef6).
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
N=$(nproc); T0=$(date +%s)
L=$OUT/logs; mkdir -p $L
trap 'rm -f $L/*/trace.json; tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$N" --target tiny_llama gpu_tests >/tmp/build.log 2>&1) &
(cd .dev/base && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg0.log 2>&1 && cmake --build build -j "$N" --target tiny_llama >/tmp/build0.log 2>&1) &
wait
[ -x build/tiny_llama ] && [ -x build/tests/gpu_tests ] && [ -x .dev/base/build/tiny_llama ] || { grep -B2 -A10 error /tmp/build.log /tmp/build0.log | head -40; exit 1; }
echo "built $(( $(date +%s) - T0 )) s"
timeout 240 build/tests/gpu_tests --gtest_filter='*GpuProfile*:*GpuKernelCheck*:Formats/Fp8Quantize.*:*GpuAttention*:*GpuLaunch*:Fp8Model.WhereFp8*' > $L/tests.log 2>&1; echo "tests rc $? $(tail -1 $L/tests.log)"; grep -E "FAILED|Failure" $L/tests.log | head
echo "tests done $(( $(date +%s) - T0 )) s"
timeout 60 build/tiny_llama --device cuda --use-amp --version v4 --seq-len 128 --num-steps 15 --timing-warmup-steps 10 --profile-steps 3 --log-every 100 --profile $L/prof_v4_default > $L/profile_v4_default.log 2>&1
sed -n '/Top 10/,/under one wave/p' $L/profile_v4_default.log
G="--precision bf16 --batch-size 16 --seq-len 1024 --hidden-dim 768 --num-heads 12 --num-kv-heads 12 --intermediate-size 2048 --vocab-size 50257 --seq-lens 1024 --long-batch 16"
for rep in 1 2; do for b in base new; do
  bin=build/tiny_llama; [ $b = base ] && bin=.dev/base/build/tiny_llama
  timeout 60 $bin kernels --levels v3,v5 $G --ops cross_entropy > $L/kernels_${b}_$rep.log 2>&1
  echo "ce $b $rep: $(grep -E '^cross_entropy ' $L/kernels_${b}_$rep.log | sort -u | awk '{print $2,$5,$6}' | tr '\n' ' ')"
done; done
for rep in 1 2 3; do for b in base new; do
  bin=build/tiny_llama; [ $b = base ] && bin=.dev/base/build/tiny_llama
  timeout 60 $bin --device cuda --use-amp --version v5 --preset gpt2-small --num-steps 40 --timing-warmup-steps 10 --log-every 1000 > $L/step_${b}_$rep.log 2>&1
  echo "gpt2 v5 $b $rep: $(grep -E 'Average batch time' $L/step_${b}_$rep.log) loss $(grep 'Final loss' $L/step_${b}_$rep.log)"
done; done
echo "steps done $(( $(date +%s) - T0 )) s"
run() { timeout 60 build/tiny_llama --device cuda --use-amp --log-every 1000 $2 > $L/$1.log 2>&1 || tail -3 $L/$1.log
  echo "$1: $(grep -E 'Average batch time' $L/$1.log | sed 's/Average batch time: //') loss $(grep 'Final loss' $L/$1.log | sed 's/Final loss: //')"; }
for rep in 1 2 3; do
  run plain_$rep "--version v5 --seq-len 128 --num-steps 300 --timing-warmup-steps 50"
  run side_$rep "--version v5 --seq-len 128 --num-steps 300 --timing-warmup-steps 50 --enable-attention-backward-side-by-side"
done
for f in "" "--enable-attention-backward-side-by-side"; do
  timeout 60 build/tiny_llama --device cuda --use-amp --version v5 --seq-len 128 --num-steps 15 --timing-warmup-steps 10 --profile-steps 3 --log-every 100 --profile $L/prof $f > $L/profile$f.log 2>&1
  echo "== profile $f"; grep -E " busy \+ |flash_backward|under one wave" $L/profile$f.log
done
echo "== done $(( $(date +%s) - T0 )) s"
