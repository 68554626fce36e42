#!/usr/bin/env bash
# The B8 T8192 attention rows with the SM clock each ran at (the benchmark's MHz column, from
# NVML): the build of scripts/gpu-check.sh (build/tiny_llama), three processes with the default
# 3 warm-up calls and three with 300 (about a second of backward calls before its repetitions,
# where the power limit holds), alternating. Run from anywhere in the repository, on the GPU
# machine, with OUT set to a folder for the CSV files.
cd "$(dirname "$0")/../../../.."  # the repository root
BIN=${TT_BIN:-build/tiny_llama}
for rep in 1 2 3; do
  for w in 3 300; do
    $BIN kernels --impl v2,v3 --long-batch 8 --seq-lens 8192 --warmup $w --csv $OUT/w${w}_$rep.csv >/dev/null 2>&1
    awk -F, -v lab="warmup $w, process $rep" '$1=="attention" && $3=="B8 T8192" {
        t[$4 " " $2] = $12; mhz[$4 " " $2] = $24; lim[$4 " " $2] = $25}
      END {printf "%s: cuDNN fwd %.1f (%d MHz) bwd %.1f (%d MHz, limited %.2f) | ours fwd %.1f (%d MHz) bwd %.1f (%d MHz, limited %.2f) | ratio %.3f\n",
           lab, t["v2 fwd"], mhz["v2 fwd"], t["v2 bwd"], mhz["v2 bwd"], lim["v2 bwd"], t["v3 fwd"], mhz["v3 fwd"],
           t["v3 bwd"], mhz["v3 bwd"], lim["v3 bwd"], t["v3 fwd+bwd"] / t["v2 fwd+bwd"]}' $OUT/w${w}_$rep.csv
  done
done
