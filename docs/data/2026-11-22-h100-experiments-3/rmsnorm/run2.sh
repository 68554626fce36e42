#!/usr/bin/env bash
# Second round of run.sh (same builds): where the dw column blocks stop paying, n = 1024 to 4096
# rows of 512 (B8, T128 to T512), each setting twice, alternating.
cd "$(dirname "$0")/../../../.."  # the repository root
E=build/exp
ALL=1000000000
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
show() { awk -F, '$1=="rmsnorm" && $2=="bwd" {printf "%s %.2f us %.1f%% | ", $3, 1000 * $7, 100 * $14}' $1; echo; }
L="--impl v3 --long-batch 8 --seq-lens 192,256,384,512 --warmup 3 --repeats 20"
for rep in 1 2; do
  for m in 0 $ALL; do
    TT_EXP_MIXED_ROWS=$m timeout 100 $E/tiny_llama_mixed kernels $L --csv $OUT/n_${m}_$rep.csv >/dev/null 2>&1
    echo "mixed rows <= $m rep $rep: $(show $OUT/n_${m}_$rep.csv)"
  done
done
