#!/usr/bin/env bash
# How much the B8 T8192 attention ratio to cuDNN moves between processes: the same binary
# (TT_BIN, by default build/exp/tiny_llama_base, a build of 2bb644d) run eight times, cuDNN (v2)
# and ours (v3) in each process. Run from anywhere in the repository, on the GPU machine, with
# OUT set to a folder for the CSV files. The second round ran TT_BIN=build/tiny_llama, built
# from bf119fb by scripts/gpu-check.sh.
cd "$(dirname "$0")/../../../.."  # the repository root
BIN=${TT_BIN:-build/exp/tiny_llama_base}
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
for rep in 1 2 3 4 5 6 7 8; do
  timeout 60 $BIN kernels --impl v2,v3 --long-batch 8 --seq-lens 8192 --csv $OUT/run_$rep.csv >/dev/null 2>&1
  awk -F, -v rep=$rep '$1=="attention" && $3=="B8 T8192" {t[$4 " " $2] = $12}
    END {printf "run %d: cuDNN fwd %.1f bwd %.1f fwd+bwd %.1f | ours fwd %.1f bwd %.1f fwd+bwd %.1f | ratio %.3f\n", rep,
         t["v2 fwd"], t["v2 bwd"], t["v2 fwd+bwd"], t["v3 fwd"], t["v3 bwd"], t["v3 fwd+bwd"], t["v3 fwd+bwd"] / t["v2 fwd+bwd"]}' $OUT/run_$rep.csv
done
