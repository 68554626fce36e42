#!/usr/bin/env bash
# experiment 2: block order of the attention kernels (bit 0 forward, 1 dQ, 2 dK/dV: tiles in x)
# Run from anywhere in the repository, on the GPU machine, with OUT set to a folder for the
# CSV files. It expects build/exp/tiny_llama_base (a build of 31cd0ed) and
# build/exp/tiny_llama_exp and build/exp/gpu_tests_exp (built from 31cd0ed with
# attention_block_order.diff applied).
cd "$(dirname "$0")/../../../.."  # the repository root
E=build/exp
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
TT_EXP_ORDER=7 timeout 120 $E/gpu_tests_exp --gtest_filter='Types/GpuAttention.*' 2>&1 | tail -2
L="--long-batch 8 --seq-lens 4096,8192 --warmup 3 --repeats 20"
show() { awk -F, '$1=="attention" && $4=="v3" {printf "%s %s %.1f | ", $2, $3, $12}' $1; echo; }
timeout 100 $E/tiny_llama_exp kernels --impl v2,v3 $L --csv $OUT/o0_v2.csv >/dev/null 2>&1
awk -F, '$1=="attention" && $4=="v2" {printf "v2 %s %s %.1f | ", $2, $3, $12}' $OUT/o0_v2.csv; echo
echo "order 0: $(show $OUT/o0_v2.csv)"
for rep in 1 2; do
  for o in 2 4 6 1 0; do
    [ $rep = 2 ] && [ $o = 1 ] && continue
    TT_EXP_ORDER=$o timeout 60 $E/tiny_llama_exp kernels --impl v3 $L --csv $OUT/o${o}_$rep.csv >/dev/null 2>&1
    echo "order $o rep $rep: $(show $OUT/o${o}_$rep.csv)"
  done
done
