#!/usr/bin/env bash
# Two questions in one job on an H100 (run from anywhere in the repository, on the GPU machine,
# with OUT set to a folder for the results):
# 1. Does the B8 T8192 backward's speed move with the SM clock? nvidia-smi samples the clock,
#    the power and the clock-limit reasons every 20 ms while `tiny_llama kernels` runs cuDNN
#    and ours at that shape, 60 repetitions each (build/exp/tiny_llama_base, a build of the
#    parent commit).
# 2. lse saved in base 2 (build/exp/tiny_llama_lse2, the change under test): the dK/dV kernel
#    then needs no multiply by log2 e per query. The GPU tests of that build, then both builds
#    alternating, three processes each, B8 T8192 and B1 T4096 attention, and the step at
#    B1 T4096 and B8 T128.
cd "$(dirname "$0")/../../../.."  # the repository root
set -u
B=build/exp
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv
$B/gpu_tests_lse2 > $OUT/gpu_tests_lse2.txt 2>&1; echo "gpu tests (lse2): exit $?"; tail -3 $OUT/gpu_tests_lse2.txt

nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active \
  --format=csv,noheader -lms 20 > $OUT/smi_log.csv &
SMI=$!
$B/tiny_llama_base kernels --impl v2,v3 --long-batch 8 --seq-lens 8192 --repeats 60 --csv $OUT/clock_run.csv \
  > $OUT/clock_run.log 2>&1
kill $SMI
awk -F', ' '{c[$2]++; r[$5]++} END {for (k in c) print "clock", k, c[k]; for (k in r) print "reasons", k, r[k]}' \
  $OUT/smi_log.csv | sort -k3 -n -r | head -12

ratio() {  # label, csv, shape
  awk -F, -v lab="$1" -v shape="$3" '$1=="attention" && $3==shape {t[$4 " " $2] = $12}
    END {printf "%s %s: cuDNN fwd %.1f bwd %.1f | ours fwd %.1f bwd %.1f | ratio %.3f\n", lab, shape,
         t["v2 fwd"], t["v2 bwd"], t["v3 fwd"], t["v3 bwd"], t["v3 fwd+bwd"] / t["v2 fwd+bwd"]}' "$2"
}
for rep in 1 2 3; do
  for v in base lse2; do
    $B/tiny_llama_$v kernels --impl v2,v3 --long-batch 8 --seq-lens 8192 --csv $OUT/b8_${v}_$rep.csv >/dev/null 2>&1
    ratio "$v $rep" $OUT/b8_${v}_$rep.csv "B8 T8192"
    $B/tiny_llama_$v kernels --impl v3 --long-batch 1 --seq-lens 4096 --csv $OUT/b1_${v}_$rep.csv >/dev/null 2>&1
    awk -F, -v lab="$v $rep" '$1=="attention" && $3=="B1 T4096" {printf "%s B1 T4096 ours %s %.1f\n", lab, $2, $12}' \
      $OUT/b1_${v}_$rep.csv | paste -sd' '
  done
done
for rep in 1 2 3; do
  for v in base lse2; do
    for shape in "1 4096" "8 128"; do
      set -- $shape
      $B/tiny_llama_$v --device cuda --version v3 --use-amp --batch-size $1 --seq-len $2 --num-steps 40 \
        --warmup-steps 10 --log-every 40 --json $OUT/step_${v}_b$1_t$2_$rep.json > /dev/null 2>&1
      python3 -c "import json,sys; print(sys.argv[2], 'ms/step %.3f' % json.load(open(sys.argv[1]))['summary']['step_ms_median'])" \
        $OUT/step_${v}_b$1_t$2_$rep.json "$v $rep B$1 T$2"
    done
  done
done
