#!/usr/bin/env bash
# Forward attention with a lazy rescale: a row's running maximum moves only when a tile's
# maximum exceeds it by more than 8 (base 2), so most tiles skip the rescale of O. Run from
# anywhere in the repository, on the GPU machine, with OUT set to a folder for the CSV files.
# It expects build/exp/tiny_llama_base (a build of 2bb644d) and build/exp/tiny_llama_lazy and
# build/exp/gpu_tests_lazy (db1e6cf with lazy_rescale.diff applied).
cd "$(dirname "$0")/../../../.."  # the repository root
E=build/exp
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
timeout 200 $E/gpu_tests_lazy --gtest_filter='Types/GpuAttention.*:Plans/GpuModel.*' 2>&1 | tail -1
show() { awk -F, -v v=$2 '$1=="attention" && $4==v && $3!="B8 T128" {printf "%s %s %.1f | ", $2, $3, $12}' $1; echo; }
for rep in 1 2; do
  for b in base lazy; do
    impl=v3; [ $b = base ] && [ $rep = 1 ] && impl=v2,v3  # cuDNN once, in the same job
    timeout 90 $E/tiny_llama_$b kernels --impl $impl --long-batch 8 --seq-lens 4096,8192 --csv $OUT/b8_${b}_$rep.csv >/dev/null 2>&1
    [ $impl = v2,v3 ] && echo "cuDNN B8: $(show $OUT/b8_${b}_$rep.csv v2)"
    echo "$b B8 rep $rep: $(show $OUT/b8_${b}_$rep.csv v3)"
  done
done
for b in base lazy; do
  timeout 90 $E/tiny_llama_$b kernels --impl v3 --long-batch 1 --seq-lens 1024,4096,8192 --csv $OUT/b1_$b.csv >/dev/null 2>&1
  echo "$b B1: $(show $OUT/b1_$b.csv v3)"
done
