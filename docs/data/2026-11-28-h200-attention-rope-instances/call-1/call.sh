#!/usr/bin/env bash
# Call 4 (one GPU): rope-in-attention's kernels as instances of their own (kRope), against the
# parent (.dev/base, git archive HEAD) built beside it: tests, attention kernels, steps.
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
timeout 200 build/tests/gpu_tests --gtest_filter='*GpuAttention*:*GpuKernelCheck*:*Rope*:*GpuLaunch*' > $L/tests.log 2>&1; echo "tests rc $? $(grep -E '^\[  PASSED' $L/tests.log) $(grep -c '^\[       OK' $L/tests.log) ok"; grep -E "FAILED|Failure" $L/tests.log | head
timeout 120 build/tiny_llama kernels --check --levels v3 --ops attention > $L/check.log 2>&1; echo "check rc $?"; grep -E "^attention" $L/check.log | head -8
echo "tests done $(( $(date +%s) - T0 )) s"
G="--precision bf16 --batch-size 16 --seq-len 1024 --hidden-dim 768 --num-heads 12 --num-kv-heads 12 --intermediate-size 2048 --seq-lens 1024 --long-batch 16"
for rep in 1 2; do for b in base new; do
  bin=build/tiny_llama; [ $b = base ] && bin=.dev/base/build/tiny_llama
  timeout 60 $bin kernels --levels v2,v3 $G --ops attention > $L/kernels_gpt2_${b}_$rep.log 2>&1
  timeout 90 $bin kernels --levels v2,v3 --ops attention > $L/kernels_default_${b}_$rep.log 2>&1
  echo "$b $rep gpt2: $(grep -E '^attention ' $L/kernels_gpt2_${b}_$rep.log | awk '{print $2,$3,$4,$5,$9}' | tr '\n' ';')"
  echo "$b $rep default+long: $(grep -E '^attention ' $L/kernels_default_${b}_$rep.log | awk '{print $2,$3,$4,$5,$9}' | tr '\n' ';')"
done; done
echo "kernels done $(( $(date +%s) - T0 )) s"
step() { # name bin args
  timeout 60 $2 --device cuda --use-amp --log-every 1000 ${@:3} > $L/$1.log 2>&1 || tail -3 $L/$1.log
  echo "$1: $(grep -E 'Average batch time' $L/$1.log | sed 's/Average batch time: //') loss $(grep 'Final loss' $L/$1.log | sed 's/Final loss: //')"; }
for rep in 1 2 3; do for b in base new; do
  bin=build/tiny_llama; [ $b = base ] && bin=.dev/base/build/tiny_llama
  step gpt2_v5_${b}_$rep $bin --version v5 --preset gpt2-small --num-steps 40 --timing-warmup-steps 10
  step default_v5_${b}_$rep $bin --version v5 --seq-len 128 --num-steps 300 --timing-warmup-steps 50
done; done
for b in base new; do
  bin=build/tiny_llama; [ $b = base ] && bin=.dev/base/build/tiny_llama
  step medium_v5_${b} $bin --version v5 --preset medium --num-steps 40 --timing-warmup-steps 10
  step gpt2_v4_${b} $bin --version v4 --preset gpt2-small --num-steps 40 --timing-warmup-steps 10
  step rope_v4_${b} $bin --version v4 --seq-len 128 --num-steps 300 --timing-warmup-steps 50 --enable-rope-in-attention
  step fusedbwd_v5_${b} $bin --version v5 --preset gpt2-small --num-steps 40 --timing-warmup-steps 10 --enable-fused-attention-backward
done
echo "== done $(( $(date +%s) - T0 )) s"
