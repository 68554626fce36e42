#!/usr/bin/env bash
# The dQ kernel's next key/value copies issued between its two products (S, then the copies,
# then dP), with launch bounds asking for two blocks per SM at D <= 64 (128 registers, no
# spills). Run from anywhere in the repository, on the GPU machine, with OUT set to a folder for
# the CSV files. It expects build/exp/tiny_llama_reorder (the kernels of bf119fb) and
# build/exp/tiny_llama_dq and build/exp/gpu_tests_dq (ce49d87 with dq_copies.diff applied).
cd "$(dirname "$0")/../../../.."  # the repository root
E=build/exp
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
timeout 150 $E/gpu_tests_dq --gtest_filter='Types/GpuAttention.*' 2>&1 | tail -1
show() { awk -F, '$1=="attention" && $3!="B8 T128" {t[$4 " " $2 " " $3] = $12; s[$3] = 1}
  END {for (x in s) printf "%s fwd %.1f bwd %.1f fb %.1f (cuDNN %.1f, ratio %.3f) | ", x, t["v3 fwd " x], t["v3 bwd " x],
       t["v3 fwd+bwd " x], t["v2 fwd+bwd " x], t["v3 fwd+bwd " x] / t["v2 fwd+bwd " x]; print ""}' $1; }
for rep in 1 2 3; do
  for b in reorder dq; do
    timeout 60 $E/tiny_llama_$b kernels --impl v2,v3 --long-batch 8 --seq-lens 4096,8192 --csv $OUT/b8_${b}_$rep.csv >/dev/null 2>&1
    echo "$b rep $rep: $(show $OUT/b8_${b}_$rep.csv)"
  done
done
for b in reorder dq; do
  timeout 60 $E/tiny_llama_$b kernels --impl v2,v3 --long-batch 1 --seq-lens 1024,2048,4096,8192 --csv $OUT/b1_$b.csv >/dev/null 2>&1
  echo "$b B1: $(show $OUT/b1_$b.csv)"
done
