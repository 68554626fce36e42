#!/usr/bin/env bash
# Each repetition's time and SM clock of the B8 T8192 attention rows (and the two GEMM
# ceilings: every row whose call takes more than 0.9 ms), with 3, 300 and again 3 warm-up calls.
# build/exp/tiny_llama_trace is commit 7f1557d with trace_print.diff applied: it prints
# "rep i calls c ms t mhz f limited 0|1" per repetition to stderr when TT_TRACE_REPS is set.
# Each printed line is one row's 30 repetitions as ms:MHz:limited, in the benchmark's order:
# bf16 GEMM, fp32 GEMM, cuDNN fwd, cuDNN bwd, ours fwd, ours bwd. Run from the repository root
# on the GPU machine, with OUT set to a folder for the results.
for w in 3 300 3; do
  echo "== warmup $w"
  TT_TRACE_REPS=1 build/exp/tiny_llama_trace kernels --impl v2,v3 --long-batch 8 --seq-lens 8192 --warmup $w --repeats 30 --csv $OUT/trace_w$w.csv 2> $OUT/trace_w$w.err >/dev/null
  awk '$6 > 0.9 {printf "%s:%s:%s ", $6, $8, $10} /rep 29/ && $6 > 0.9 {print ""}' $OUT/trace_w$w.err
done
