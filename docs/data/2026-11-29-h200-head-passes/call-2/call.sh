#!/usr/bin/env bash
# One H200: HEAD (3649828, .dev/head.tgz) against this tree (the head's passes: 32-bit index fast
# path and ex2.approx.ftz, unconditional; TT_Q_T4=0/1/2: the tiled pass's transpose as committed,
# in 4x4 byte blocks with warps of 8 x 4 blocks, or of 16 x 2). Kernels, tests, bits, bench.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
left() { [ $(el) -lt ${1:-520} ]; }
mkdir -p /tmp/head && tar xzf .dev/head.tgz -C /tmp/head
(cmake -S /tmp/head -B /tmp/head/build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfgh.log 2>&1 && cmake --build /tmp/head/build -j 6 --target tiny_llama >/tmp/buildh.log 2>&1) & HP=$!
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 12 --target tiny_llama gpu_tests >/tmp/build.log 2>&1) || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
wait $HP || { grep -B2 -A10 error /tmp/buildh.log | head -20; exit 1; }
echo "built $(el) s"
H=/tmp/head/build/tiny_llama; N=build/tiny_llama
G="--precision bf16 --batch-size 16 --seq-len 1024 --hidden-dim 768 --num-heads 12 --num-kv-heads 12 --intermediate-size 2048 --vocab-size 50257 --seq-lens 1024 --long-batch 16"
for r in 1 2; do for cfg in head new:0 new:1 new:2; do IFS=: read b t4 <<<"$cfg"; t4=${t4:-0}
  bin=$N; [ $b = head ] && bin=$H
  TT_Q_T4=$t4 timeout 120 $bin kernels --levels v5 $G --ops cross_entropy quantize swiglu rope > $L/k_${b}_${t4}_$r.log 2>&1
  echo "$cfg r$r: $(grep -E '^(cross_entropy|quantize|swiglu|rope) ' $L/k_${b}_${t4}_$r.log | awk '!s[$1$2]++{printf "%s-%s %s | ", $1, $2, $6}')"
done; done
echo "== kernels $(el) s"
F='Formats/Fp8Quantize.*:Fp8Model.*:*CrossEntropy*:GpuKernelCheck*:*Classifier*'
for t4 in 1 2; do
  TT_Q_T4=$t4 timeout 220 build/tests/gpu_tests --gtest_filter="$F" > $L/tests_$t4.log 2>&1
  echo "tests t4=$t4 rc $?: $(grep -cE '^\[       OK' $L/tests_$t4.log) ok, $(grep -cE '^\[  FAILED  \] [A-Z]' $L/tests_$t4.log) failed"; grep -E "^\[  FAILED" $L/tests_$t4.log | head -5
  left 330 || break
done
echo "== tests $(el) s"
run_bits() {  # name bin t4 version preset-args
  TT_Q_T4=$3 timeout 90 $2 --device cuda --version $4 --use-amp $5 --num-steps 8 --log-every 1 --grad-clip 1000 --json $L/run_$1.json > $L/run_$1.log 2>&1 || tail -3 $L/run_$1.log
}
run_bits v5g_head $H 0 v5 "--preset gpt2-small"; for t4 in 0 1 2; do run_bits v5g_new$t4 $N $t4 v5 "--preset gpt2-small"; done
run_bits v4d_head $H 0 v4 ""; run_bits v4d_new $N 0 v4 ""
run_bits v4g_head $H 0 v4 "--preset gpt2-small"; run_bits v4g_new $N 0 v4 "--preset gpt2-small"
python3 - $L <<'PY'
import json,sys
L=sys.argv[1]
def losses(c):
    d=json.load(open(f'{L}/run_{c}.json')); return [(s['loss'], s['grad_norm']) for s in d['steps']]
for a,bs in (('v5g_head',('v5g_new0','v5g_new1','v5g_new2')),('v4d_head',('v4d_new',)),('v4g_head',('v4g_new',))):
    x=losses(a)
    for b in bs:
        y=losses(b); print(f'{b}: {len(y)} steps, bit-identical to {a}: {x==y}; last {x[-1]} {y[-1]}')
PY
echo "== bits $(el) s"
for r in 1 2 3; do for cfg in head new:1 new:2; do IFS=: read b t4 <<<"$cfg"; t4=${t4:-0}
  left 560 || break
  bin=$N; [ $b = head ] && bin=$H
  n=bench_${b}_${t4}_$r
  TT_Q_T4=$t4 timeout 60 $bin bench --device cuda --levels v5 --precisions bf16 --timing-warmup-steps 5 --steps 10 --repeats 3 --preset gpt2-small --json $L/$n.json > $L/$n.log 2>&1 || tail -3 $L/$n.log
  echo "$n: $(grep -E '^v5' $L/$n.log | awk '{print $5, $6, "fwd", $9, "bwd", $10, "opt", $11}')"
done; done
echo "== done $(el) s"
