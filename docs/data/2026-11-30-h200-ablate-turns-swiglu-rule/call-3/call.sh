#!/usr/bin/env bash
# The same H200 right after g79 (its build): v6 against v6 without swiglu-in-down-gradient and
# without gemm-epilogues, the two switches ablate found -0.4% off; alternating, three rounds.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
B="build/tiny_llama bench --device cuda --precisions bf16 --levels v6 --repeats 5 --batch-sizes 8 --seq-lens 128"
for R in 1 2 3; do
  timeout 40 $B > $L/full_$R.log 2>&1
  timeout 40 $B --disable swiglu-in-down-gradient > $L/no_sdg_$R.log 2>&1
  timeout 40 $B --disable gemm-epilogues > $L/no_epi_$R.log 2>&1
  echo "round $R: full $(grep -E '^v6 ' $L/full_$R.log | awk '{print $5}') -swiglu-in-down-gradient $(grep -E '^v6 ' $L/no_sdg_$R.log | awk '{print $5}') -gemm-epilogues $(grep -E '^v6 ' $L/no_epi_$R.log | awk '{print $5}') $(el) s"
done
