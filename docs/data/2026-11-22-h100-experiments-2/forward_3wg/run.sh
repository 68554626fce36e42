#!/usr/bin/env bash
# experiment 3: forward with three warpgroups and 128-key tiles, tree_max without local memory
# Run from anywhere in the repository, on the GPU machine, with OUT set to a folder for the
# CSV files. It expects build/exp/tiny_llama_base (a build of 31cd0ed) and
# build/exp/tiny_llama_exp and build/exp/gpu_tests_exp (built from 31cd0ed with
# forward_3wg_128keys_no_local.diff applied).
cd "$(dirname "$0")/../../../.."  # the repository root
E=build/exp
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
TT_EXP_FWD3=1 timeout 100 $E/gpu_tests_exp --gtest_filter='Types/GpuAttention.*/bf16:Plans/GpuModel.*custom_attention_bf16*' 2>&1 | tail -2
show() { awk -F, '$1=="attention" && $4=="v3" {printf "%s %s %.1f | ", $2, $3, $12}' $1; echo; }
for rep in 1 2; do
  timeout 80 $E/tiny_llama_base kernels --impl v3 --long-batch 8 --seq-lens 1024,4096,8192 --csv $OUT/base8_$rep.csv >/dev/null 2>&1
  echo "base B8 $rep: $(show $OUT/base8_$rep.csv)"
  TT_EXP_FWD3=1 timeout 80 $E/tiny_llama_exp kernels --impl v3 --long-batch 8 --seq-lens 1024,4096,8192 --csv $OUT/fwd3_8_$rep.csv >/dev/null 2>&1
  echo "fwd3 B8 $rep: $(show $OUT/fwd3_8_$rep.csv)"
done
timeout 60 $E/tiny_llama_base kernels --impl v3 --long-batch 1 --seq-lens 2048,4096,8192 --csv $OUT/base1.csv >/dev/null 2>&1
echo "base B1: $(show $OUT/base1.csv)"
TT_EXP_FWD3=1 timeout 60 $E/tiny_llama_exp kernels --impl v3 --long-batch 1 --seq-lens 2048,4096,8192 --csv $OUT/fwd3_1.csv >/dev/null 2>&1
echo "fwd3 B1: $(show $OUT/fwd3_1.csv)"
