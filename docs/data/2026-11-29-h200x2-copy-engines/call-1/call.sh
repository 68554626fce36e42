#!/usr/bin/env bash
# Two H200s: where gpt2-small's ZeRO-1 step spends its extra ms against one GPU: forward,
# backward, the tail after the backward (marks 1-4), alternating one GPU (both at once) and 2 ranks.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 32 --target tiny_llama >/tmp/build.log 2>&1) || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"
F="--device cuda --version v4 --preset gpt2-small --use-amp --reduce-dtype fp32 --num-steps 60 --timing-warmup-steps 10 --log-every 1000"
show() { python3 -c "
import json,sys
s=json.load(open(sys.argv[1]))['summary']
print(sys.argv[2], 'step %.3f median %.3f fwd %.3f bwd %.3f opt %.3f' % (s['step_ms'], s['step_ms_median'], s['forward_ms'], s['backward_ms'], s['optimizer_ms']))" $1 $2; }
for rep in 1 2; do
  CUDA_VISIBLE_DEVICES=0 timeout 100 build/tiny_llama $F --json $L/one0_$rep.json > $L/one0_$rep.log 2>&1 &
  CUDA_VISIBLE_DEVICES=1 timeout 100 build/tiny_llama $F --json $L/one1_$rep.json > $L/one1_$rep.log 2>&1 &
  wait
  show $L/one0_$rep.json "1 GPU (0) $rep"; show $L/one1_$rep.json "1 GPU (1) $rep"
  timeout 120 build/tiny_llama $F --nproc-per-node 2 --zero 1 --json $L/z1_$rep.json > $L/z1_$rep.log 2>&1 || tail -5 $L/z1_$rep.log
  show $L/z1_$rep.json "ZeRO-1 $rep"
  timeout 120 build/tiny_llama $F --nproc-per-node 2 --zero 1 --metrics $L/z1m_$rep.jsonl --json $L/z1b_$rep.json > $L/z1b_$rep.log 2>&1 || tail -5 $L/z1b_$rep.log
  show $L/z1b_$rep.json "ZeRO-1 again $rep"
  echo "$(el) s"
done
# rank 1's view: the same 2-rank job with rank 1 timed (ranks swapped by CUDA_VISIBLE_DEVICES)
CUDA_VISIBLE_DEVICES=1,0 timeout 120 build/tiny_llama $F --nproc-per-node 2 --zero 1 --json $L/z1swap.json > $L/z1swap.log 2>&1 || tail -5 $L/z1swap.log
show $L/z1swap.json "ZeRO-1 GPUs swapped"
# profiles: one GPU and rank 0 of two
timeout 100 build/tiny_llama $F --num-steps 15 --profile-steps 3 --profile $L/prof_one > $L/prof_one.log 2>&1; echo "prof one rc $?"
timeout 120 build/tiny_llama $F --num-steps 15 --profile-steps 3 --nproc-per-node 2 --zero 1 --profile $L/prof_two > $L/prof_two.log 2>&1; echo "prof two rc $?"
grep -E "busy" $L/prof_one.log $L/prof_two.log | head -8
python3 scripts/profile/overlap.py $L/prof_two/trace.json --one-gpu $L/prof_one/trace.json 2>&1 | head -40
echo "== done $(el) s"
