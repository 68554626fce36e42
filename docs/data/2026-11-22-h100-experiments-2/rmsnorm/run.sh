#!/usr/bin/env bash
# experiment 1: RMSNorm backward row mapping and second-stage width
# Run from anywhere in the repository, on the GPU machine, with OUT set to a folder for the
# CSV files. It expects build/exp/tiny_llama_base (a build of 31cd0ed) and
# build/exp/tiny_llama_exp and build/exp/gpu_tests_exp (built from 31cd0ed with
# rmsnorm_rows_and_sum_width.diff applied).
cd "$(dirname "$0")/../../../.."  # the repository root
E=build/exp
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
TT_EXP_STRIDE=1 TT_EXP_COLS=8 $E/gpu_tests_exp --gtest_filter='*RmsNorm*:*rmsnorm*:Plans/GpuModel.*' 2>&1 | tail -3
L="--impl v3 --long-batch 8 --seq-lens 1024,1536,2048,3072,4096,8192 --warmup 3 --repeats 20"
for rep in 1 2; do
  for v in "base::" "exp::" "exp:1:" "exp::8" "exp:1:8" "exp:1:16"; do
    IFS=: read -r bin stride cols <<<"$v"
    env ${stride:+TT_EXP_STRIDE=1} ${cols:+TT_EXP_COLS=$cols} $E/tiny_llama_$bin kernels $L --csv $OUT/k_${bin}_s${stride}_c${cols}_$rep.csv >/dev/null 2>&1
    echo "$v rep $rep: $(awk -F, '$1=="rmsnorm" && $2=="bwd" {printf "%s %.1f%%  ", $3, 100*$14}' $OUT/k_${bin}_s${stride}_c${cols}_$rep.csv)"
  done
done
S="--device cuda --version v3 --use-amp --batch-size 8 --seq-len 128 --num-steps 60 --warmup-steps 10"
for rep in 1 2 3; do
  echo "step base: $($E/tiny_llama_base $S 2>&1 | grep "Average batch time")"
  echo "step exp s1 c8: $(TT_EXP_STRIDE=1 TT_EXP_COLS=8 $E/tiny_llama_exp $S 2>&1 | grep "Average batch time")"
done
