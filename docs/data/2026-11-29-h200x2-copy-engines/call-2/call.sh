#!/usr/bin/env bash
# Two H200s: ZeRO-1's reduce-scatter as an all-to-all on the copy engines (NCCL_CTA_POLICY=2,
# TT_A2A=1) and one addition kernel, against NCCL's reduce-scatter kernel; gpt2-small and medium.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 32 --target tiny_llama >/tmp/build.log 2>&1) || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"
show() { python3 -c "
import json,sys,statistics as st
d=json.load(open(sys.argv[1])); S=d['steps'][10:]; s=d['summary']
m=lambda k: st.median([x[k] for x in S])
print('%-28s step mean %.3f median %.3f | fwd %.3f bwd %.3f opt %.3f | loss %.10f' % (sys.argv[2], s['step_ms'], m('ms'), m('forward_ms'), m('backward_ms'), m('optimizer_ms'), s['final_loss']))" "$1" "$2"; }
for model in gpt2-small medium; do
F="--device cuda --version v4 --preset $model --use-amp --reduce-dtype fp32 --num-steps 60 --timing-warmup-steps 10 --log-every 1000"
CUDA_VISIBLE_DEVICES=0 timeout 100 build/tiny_llama $F --json $L/${model}_one0.json > $L/${model}_one0.log 2>&1 &
CUDA_VISIBLE_DEVICES=1 timeout 100 build/tiny_llama $F --json $L/${model}_one1.json > $L/${model}_one1.log 2>&1 &
wait
show $L/${model}_one0.json "$model 1 GPU (0)"; show $L/${model}_one1.json "$model 1 GPU (1)"
for rep in 1 2; do
  timeout 120 build/tiny_llama $F --nproc-per-node 2 --zero 1 --json $L/${model}_rs_$rep.json > $L/${model}_rs_$rep.log 2>&1 || tail -5 $L/${model}_rs_$rep.log
  show $L/${model}_rs_$rep.json "$model reduce-scatter $rep"
  NCCL_CTA_POLICY=2 TT_A2A=1 timeout 120 build/tiny_llama $F --nproc-per-node 2 --zero 1 --json $L/${model}_a2a_$rep.json > $L/${model}_a2a_$rep.log 2>&1 || tail -5 $L/${model}_a2a_$rep.log
  show $L/${model}_a2a_$rep.json "$model all-to-all CE $rep"
  NCCL_CTA_POLICY=2 timeout 120 build/tiny_llama $F --nproc-per-node 2 --zero 1 --json $L/${model}_ce_$rep.json > $L/${model}_ce_$rep.log 2>&1 || tail -5 $L/${model}_ce_$rep.log
  show $L/${model}_ce_$rep.json "$model gathers CE $rep"
done
echo "$(el) s"
done
F="--device cuda --version v4 --preset gpt2-small --use-amp --reduce-dtype fp32 --log-every 1000"
NCCL_DEBUG=INFO NCCL_CTA_POLICY=2 TT_A2A=1 timeout 100 build/tiny_llama $F --num-steps 15 --profile-steps 3 --nproc-per-node 2 --zero 1 --profile $L/prof_a2a > $L/prof_a2a.log 2>&1; echo "prof a2a rc $?"
grep -iE "CE |copy engine|Init CE|ctaPolicy|CTA policy" $L/prof_a2a.log | head -5
grep -E "busy" $L/prof_a2a.log | head -3
grep -iE "nccl" $L/prof_a2a/kernels.csv | head
echo "== done $(el) s"
