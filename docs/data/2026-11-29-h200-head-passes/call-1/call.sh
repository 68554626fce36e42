#!/usr/bin/env bash
# One H200, env switches of one build: TT_CE_EXP=0 (as committed), 1 (the head's passes: 32-bit
# index fast path), 2 (1 + ex2.approx.ftz); TT_Q_T4=1 (the tiled FP8 pass's transpose in 4x4 byte
# blocks). A config is CE:T4. SASS counts, kernels, tests, bits, bench.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
left() { [ $(el) -lt ${1:-520} ]; }
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 16 --target tiny_llama gpu_tests >/tmp/build.log 2>&1) || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
echo "built $(el) s"
for f in cross_entropy swiglu; do O=$(find build -name "$f.cu.o" | head -1); cuobjdump -sass "$O" > $L/$f.sass 2>&1; done
python3 - $L/cross_entropy.sass $L/swiglu.sass > $L/sass_counts.txt <<'PY'
import re,sys,collections
for path in sys.argv[1:]:
    fn=None; c=collections.defaultdict(collections.Counter)
    for line in open(path):
        m=re.search(r'Function : (\S+)',line)
        if m: fn=m.group(1); continue
        m=re.match(r'\s+/\*[0-9a-f]{4,}\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)',line)
        if m and fn: c[fn][m.group(2).split('.')[0]]+=1
    for fn,cnt in c.items():
        if ('quantize_kernel' in fn and '13__nv_bfloat16' in fn and 'Lb1ELb1E' in fn) or 'cross_entropy_kernelI13__nv_bfloat16Li8ELb1ELb0ELi2' in fn:
            print(sum(cnt.values()), fn); print('   ', ' '.join(f'{k}:{v}' for k,v in cnt.most_common(30)))
PY
sed -E 's/_ZN2tt4cuda[0-9A-Za-z_]*(SoftmaxGradient|SwiGluInputGradient|SwiGluOutput|cross_entropy_kernel)/\1/' $L/sass_counts.txt | cut -c1-330
G="--precision bf16 --batch-size 16 --seq-len 1024 --hidden-dim 768 --num-heads 12 --num-kv-heads 12 --intermediate-size 2048 --vocab-size 50257 --seq-lens 1024 --long-batch 16"
for r in 1 2; do for cfg in 0:0 1:0 2:0 2:1; do IFS=: read ce t4 <<<"$cfg"
  TT_CE_EXP=$ce TT_Q_T4=$t4 timeout 90 build/tiny_llama kernels --levels v5 $G --ops cross_entropy > $L/kce_${ce}_${t4}_$r.log 2>&1
  echo "ce $cfg r$r: $(grep -E '^cross_entropy' $L/kce_${ce}_${t4}_$r.log | head -2 | tr -s ' ' | tr '\n' '|')"
done; for t4 in 0 1; do
  TT_Q_T4=$t4 timeout 120 build/tiny_llama kernels --levels v5 $G --ops quantize,swiglu,rope > $L/kq_${t4}_$r.log 2>&1
  echo "quantize/swiglu/rope t4=$t4 r$r:"; grep -E "^(quantize|swiglu|rope)" $L/kq_${t4}_$r.log | tr -s ' ' | cut -c1-110
done; done
echo "== kernels $(el) s"
F='Formats/Fp8Quantize.*:Fp8Model.Gpt2Small*:*CrossEntropy*:Fp8Model.Fused*:GpuKernelCheck*'
for cfg in 2:1 1:0; do IFS=: read ce t4 <<<"$cfg"
  TT_CE_EXP=$ce TT_Q_T4=$t4 timeout 200 build/tests/gpu_tests --gtest_filter="$F" > $L/tests_${ce}_$t4.log 2>&1
  echo "tests $cfg rc $?: $(grep -cE '^\[       OK' $L/tests_${ce}_$t4.log) ok, $(grep -cE '^\[  FAILED  \] [A-Z]' $L/tests_${ce}_$t4.log) failed"; grep -E "^\[  FAILED" $L/tests_${ce}_$t4.log | head -5
done
echo "== tests $(el) s"
for cfg in 0:0 1:0 2:0 2:1; do IFS=: read ce t4 <<<"$cfg"
  TT_CE_EXP=$ce TT_Q_T4=$t4 timeout 90 build/tiny_llama --device cuda --version v5 --use-amp --preset gpt2-small --num-steps 8 --log-every 1 --grad-clip 1000 --json $L/run_${ce}_$t4.json > $L/run_${ce}_$t4.log 2>&1 || tail -3 $L/run_${ce}_$t4.log
done
python3 - $L <<'PY'
import json,sys
L=sys.argv[1]
def losses(c):
    d=json.load(open(f'{L}/run_{c}.json')); return [(s['loss'], s['grad_norm']) for s in d['steps']]
a=losses('0_0')
for c in ('1_0','2_0','2_1'):
    b=losses(c); print(f'run {c}: {len(b)} steps, identical to 0_0: {a==b}; last {a[-1]} {b[-1]}')
PY
echo "== bits $(el) s"
for r in 1 2; do for cfg in 0:0 2:1 1:0 2:0; do IFS=: read ce t4 <<<"$cfg"
  left 545 || break
  n=bench_${ce}_${t4}_$r
  TT_CE_EXP=$ce TT_Q_T4=$t4 timeout 70 build/tiny_llama bench --device cuda --levels v5 --precisions bf16 --timing-warmup-steps 5 --steps 10 --repeats 3 --preset gpt2-small --json $L/$n.json > $L/$n.log 2>&1 || tail -3 $L/$n.log
  echo "$n: $(grep -E '^v5' $L/$n.log | awk '{print $5, $6, "fwd", $9, "bwd", $10, "opt", $11}')"
done; done
echo "== done $(el) s"
