#!/usr/bin/env bash
# One H200, three trees in one job: head = c949645 (.dev/c949645.tgz), t1 = head with the FP8
# transposes of the norm, the attention and the tiled pass through store_transposed (.dev/t1.tgz's
# src), new = this working tree (t1 and SwiGLU's sigmoid from __expf and __fdividef). Kernel rows,
# steps, and the training bits of each against head.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
mkdir -p /tmp/head /tmp/t1 && tar xzf .dev/c949645.tgz -C /tmp/head && tar xzf .dev/c949645.tgz -C /tmp/t1 && rm -rf /tmp/t1/src && tar xzf .dev/t1.tgz -C /tmp/t1
for t in head t1; do (cmake -S /tmp/$t -B /tmp/$t/build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg$t.log 2>&1 && cmake --build /tmp/$t/build -j 4 --target tiny_llama >/tmp/build$t.log 2>&1) & done
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 8 --target tiny_llama >/tmp/build.log 2>&1) || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
wait; for t in head t1; do [ -x /tmp/$t/build/tiny_llama ] || { grep -B2 -A10 error /tmp/build$t.log | head; exit 1; }; done
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader; echo "built $(el) s"
bin() { case $1 in head) echo /tmp/head/build/tiny_llama;; t1) echo /tmp/t1/build/tiny_llama;; new) echo build/tiny_llama;; esac; }
K="--levels v5 --precision bf16 --batch-size 16 --seq-len 1024 --hidden-dim 768 --num-heads 12 --num-kv-heads 12 --intermediate-size 2048 --vocab-size 50257 --seq-lens 1024 --long-batch 16 --ops rmsnorm attention quantize swiglu rope cross_entropy"
for r in 1 2; do for b in head t1 new; do
  [ $r = 2 ] && [ $b = t1 ] && continue
  timeout 90 $(bin $b) kernels $K > $L/k_${b}_$r.log 2>&1 || tail -3 $L/k_${b}_$r.log
done; done
KA="${K% --ops *} --ops attention"
for r in 1 2; do TT_PINGPONG=1 timeout 90 build/tiny_llama kernels $KA > $L/k_newpp_$r.log 2>&1 || tail -3 $L/k_newpp_$r.log; done
echo "newpp attention: $(grep -E '^attention' $L/k_newpp_1.log | awk '{print $2, $6}' | sort -u | tr '\n' ' ') / $(grep -E '^attention' $L/k_newpp_2.log | awk '{print $2, $6}' | sort -u | tr '\n' ' ')"
echo "== kernels $(el) s"
for b in head t1 new; do echo "$b: $(awk '/^(rmsnorm|attention|quantize|swiglu|rope|cross_entropy) /{k=$1" "$2; if(!(k in s)){s[k]=$6; o[++n]=k}} END{for(i=1;i<=n;i++) printf "%s %s | ", o[i], s[o[i]]}' $L/k_${b}_1.log)"; echo "$b: $(awk '/^(rmsnorm|attention|quantize|swiglu|rope|cross_entropy) /{k=$1" "$2; if(!(k in s)){s[k]=$6; o[++n]=k}} END{for(i=1;i<=n;i++) printf "%s %s | ", o[i], s[o[i]]}' $L/k_${b}_2.log)"; done
TT_PINGPONG=1 timeout 60 build/tiny_llama --device cuda --version v5 --use-amp --preset gpt2-small --num-steps 8 --log-every 1 --grad-clip 1000 --json $L/run_newpp.json > $L/run_newpp.log 2>&1 || tail -3 $L/run_newpp.log
for b in head t1 new; do timeout 60 $(bin $b) --device cuda --version v5 --use-amp --preset gpt2-small --num-steps 8 --log-every 1 --grad-clip 1000 --json $L/run_$b.json > $L/run_$b.log 2>&1 || tail -3 $L/run_$b.log; done
python3 -c "
import json,sys
r={n:[(s['loss'],s.get('grad_norm')) for s in json.load(open('$L/run_%s.json'%n))['steps']] for n in ('head','t1','new','newpp')}
for a,b in (('t1','head'),('newpp','new'),('new','head')):
  print('bits', a, 'vs', b+':', 'identical' if r[a]==r[b] else 'DIFFER', len(r[a]), 'steps; last', r[a][-1], r[b][-1])" 2>&1 | tail -4
echo "== bits $(el) s"
for r in 1 2; do for b in head t1 new; do
  [ $r = 2 ] && [ $b = t1 ] && continue
  n=bench_${b}_$r
  [ $b = new ] && TT_PINGPONG=1 timeout 60 build/tiny_llama bench --device cuda --levels v5 --precisions bf16 --timing-warmup-steps 5 --steps 10 --repeats 3 --preset gpt2-small --json $L/${n}pp.json > $L/${n}pp.log 2>&1 && echo "${n}pp: $(grep -E '^v5' $L/${n}pp.log | awk '{print $5, $6, "fwd", $9, "bwd", $10, "opt", $11}')"
  timeout 60 $(bin $b) bench --device cuda --levels v5 --precisions bf16 --timing-warmup-steps 5 --steps 10 --repeats 3 --preset gpt2-small --json $L/$n.json > $L/$n.log 2>&1 || tail -3 $L/$n.log
  echo "$n: $(grep -E '^v5' $L/$n.log | awk '{print $5, $6, "fwd", $9, "bwd", $10, "opt", $11}')"
done; done
echo "== bench $(el) s"
echo "done $(el) s"
