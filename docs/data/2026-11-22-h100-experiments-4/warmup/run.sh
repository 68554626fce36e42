#!/usr/bin/env bash
# Is the B8 T8192 backward's spread the clock? The same build (build/exp/tiny_llama_base, the
# parent commit) times cuDNN and ours at B8 T8192 with the benchmark's 3 warm-up calls and with
# 300 (about a second of backward calls before its repetitions), three processes each,
# alternating, while nvidia-smi samples the SM clock and the clock-limit reasons. Run from
# anywhere in the repository, on the GPU machine, with OUT set to a folder for the results.
cd "$(dirname "$0")/../../../.."  # the repository root
BIN=build/exp/tiny_llama_base
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active \
  --format=csv,noheader -lms 20 > $OUT/smi_log.csv &
SMI=$!
for rep in 1 2 3; do
  for w in 3 300; do
    date +%T.%N | cut -c1-12 | sed "s/^/start warmup $w rep $rep /"
    $BIN kernels --impl v2,v3 --long-batch 8 --seq-lens 8192 --warmup $w --csv $OUT/w${w}_$rep.csv >/dev/null 2>&1
    awk -F, -v lab="warmup $w rep $rep" '$1=="attention" && $3=="B8 T8192" {t[$4 " " $2] = $12; lo[$4 " " $2] = $8; hi[$4 " " $2] = $9}
      END {printf "%s: cuDNN fwd %.1f bwd %.1f (%.2f-%.2f ms) | ours fwd %.1f bwd %.1f (%.2f-%.2f ms) | ratio %.3f\n", lab,
           t["v2 fwd"], t["v2 bwd"], lo["v2 bwd"], hi["v2 bwd"], t["v3 fwd"], t["v3 bwd"], lo["v3 bwd"], hi["v3 bwd"],
           t["v3 fwd+bwd"] / t["v2 fwd+bwd"]}' $OUT/w${w}_$rep.csv
  done
done
kill $SMI
awk -F', ' '$5 != "0x0000000000000000" {n++; if (!($2 in seen)) {seen[$2]=1}} END {print n, "samples with a clock-limit reason of", NR}' $OUT/smi_log.csv
