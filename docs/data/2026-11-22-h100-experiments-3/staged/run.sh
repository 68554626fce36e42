#!/usr/bin/env bash
# Staged backward steps: P (or P^T) computed while dP is still being multiplied, and in the
# dK/dV kernel dS^T while dV is. Run from anywhere in the repository, on the GPU machine, with
# OUT set to a folder for the CSV files. It expects build/exp/tiny_llama_base (a build of
# 2bb644d), build/exp/tiny_llama_staged and build/exp/gpu_tests_staged (2bb644d with
# staged_backward.diff applied) and build/exp/tiny_llama_dkdv (the same, dK/dV kernel only).
cd "$(dirname "$0")/../../../.."  # the repository root
E=build/exp
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
timeout 150 $E/gpu_tests_staged --gtest_filter='Types/GpuAttention.*:Plans/GpuModel.*' 2>&1 | tail -3
show() { awk -F, -v v=$2 '$1=="attention" && $4==v && $3!="B8 T128" {printf "%s %s %.1f | ", $2, $3, $12}' $1; echo; }
L="--long-batch 8 --seq-lens 4096,8192 --warmup 3 --repeats 20"
for rep in 1 2 3; do
  for b in base staged dkdv; do
    [ $b = dkdv ] && [ $rep = 3 ] && continue
    impl=v3; [ $b = base ] && [ $rep = 1 ] && impl=v2,v3  # cuDNN once, in the same job
    timeout 90 $E/tiny_llama_$b kernels --impl $impl $L --csv $OUT/b8_${b}_$rep.csv >/dev/null 2>&1
    [ $impl = v2,v3 ] && echo "cuDNN: $(show $OUT/b8_${b}_$rep.csv v2)"
    echo "$b rep $rep: $(show $OUT/b8_${b}_$rep.csv v3)"
  done
done
