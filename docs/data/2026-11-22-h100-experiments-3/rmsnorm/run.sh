#!/usr/bin/env bash
# RMSNorm backward with dw computed by column blocks in the same kernel (no partial sums, no
# second launch) for n <= TT_EXP_MIXED_ROWS, against the two-stage dw. Run from anywhere in the
# repository, on the GPU machine, with OUT set to a folder for the CSV files. It expects
# build/exp/tiny_llama_mixed and build/exp/gpu_tests_mixed (2bb644d with rmsnorm_mixed.diff).
cd "$(dirname "$0")/../../../.."  # the repository root
E=build/exp
ALL=1000000000
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
for m in $ALL 0; do
  TT_EXP_MIXED_ROWS=$m timeout 200 $E/gpu_tests_mixed --gtest_filter='Types/GpuOps.RmsNorm*:Plans/GpuModel.*' 2>&1 | tail -1
done
show() { awk -F, '$1=="rmsnorm" && $2=="bwd" {printf "%s %.1f%% | ", $3, 100 * $14}' $1; echo; }
L="--impl v3 --long-batch 8 --seq-lens 1024,2048,4096,8192 --warmup 3 --repeats 20"
for rep in 1 2; do
  for m in 0 $ALL; do
    TT_EXP_MIXED_ROWS=$m timeout 100 $E/tiny_llama_mixed kernels $L --csv $OUT/k_${m}_$rep.csv >/dev/null 2>&1
    echo "mixed rows <= $m rep $rep: $(show $OUT/k_${m}_$rep.csv)"
  done
done
S="--device cuda --version v3 --use-amp --batch-size 8 --seq-len 128 --num-steps 60 --warmup-steps 10"
for rep in 1 2 3; do
  for m in 0 $ALL; do
    echo "step B8 T128 mixed rows <= $m rep $rep: $(TT_EXP_MIXED_ROWS=$m timeout 60 $E/tiny_llama_mixed $S 2>&1 | grep 'Average batch time')"
  done
done
