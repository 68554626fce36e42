#!/usr/bin/env bash
# The next tile's cp.async copies issued after the step's products instead of before them, in
# the forward and dK/dV kernels (in dQ the change cost 29 registers, one block per SM: not
# built). Run from anywhere in the repository, on the GPU machine, with OUT set to a folder for
# the CSV files. It expects build/exp/tiny_llama_base (a build of 2bb644d) and
# build/exp/tiny_llama_reorder and build/exp/gpu_tests_reorder (b3a15b1 with
# copies_after_products.diff applied). Four processes of each, alternating, cuDNN and ours in
# each, at B8 T4096 and T8192.
cd "$(dirname "$0")/../../../.."  # the repository root
E=build/exp
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
timeout 200 $E/gpu_tests_reorder --gtest_filter='Types/GpuAttention.*:Plans/GpuModel.*' 2>&1 | tail -1
show() { awk -F, '$1=="attention" && $3!="B8 T128" {t[$4 " " $2 " " $3] = $12; s[$3] = 1}
  END {for (x in s) printf "%s fwd %.1f bwd %.1f fb %.1f (cuDNN %.1f, ratio %.3f) | ", x, t["v3 fwd " x], t["v3 bwd " x],
       t["v3 fwd+bwd " x], t["v2 fwd+bwd " x], t["v3 fwd+bwd " x] / t["v2 fwd+bwd " x]; print ""}' $1; }
for rep in 1 2 3 4; do
  for b in base reorder; do
    timeout 60 $E/tiny_llama_$b kernels --impl v2,v3 --long-batch 8 --seq-lens 4096,8192 --csv $OUT/b8_${b}_$rep.csv >/dev/null 2>&1
    echo "$b rep $rep: $(show $OUT/b8_${b}_$rep.csv)"
  done
done
