#!/usr/bin/env bash
# Second round of run.sh (same builds): batch 1 kernels, and the steps at B8 T128 and B1 T4096.
cd "$(dirname "$0")/../../../.."  # the repository root
E=build/exp
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
show() { awk -F, '$1=="attention" && $4=="v3" && $3!="B8 T128" {printf "%s %s %.1f | ", $2, $3, $12}' $1; echo; }
for b in base reorder; do
  timeout 60 $E/tiny_llama_$b kernels --impl v3 --long-batch 1 --seq-lens 1024,2048,4096,8192 --csv $OUT/b1_$b.csv >/dev/null 2>&1
  echo "$b B1: $(show $OUT/b1_$b.csv)"
done
for rep in 1 2; do
  for b in base reorder; do
    echo "$b B8 T128 rep $rep: $(timeout 60 $E/tiny_llama_$b --device cuda --version v3 --use-amp --batch-size 8 --seq-len 128 --num-steps 60 --warmup-steps 10 2>&1 | grep 'Average batch time')"
    echo "$b B1 T4096 rep $rep: $(timeout 60 $E/tiny_llama_$b --device cuda --version v3 --use-amp --batch-size 1 --seq-len 4096 --num-steps 30 --warmup-steps 5 2>&1 | grep 'Average batch time')"
  done
done
