#!/usr/bin/env bash
# Two H200s, a clean tree at HEAD. (1) Is the 2-GPU step's growth communication or clocks? With
# nvidia-smi sampling both GPUs' SM clock, power and temperature every 100 ms: gpt2-small v4 bf16,
# 60 steps after 10 warm-up, as `bench --nproc-per-node 2` runs it: one GPU alone (GPU 0, then
# GPU 1), two one-GPU jobs at once (one on each), and ZeRO-1 on both; twice, alternating; then
# 300 steps alone and as ZeRO-1. (2) On GPU 0 alone: v4/v5 beside PyTorch's strongest at
# gpt2-small and medium and the default shape, for v5.md's main table.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'kill $SMI 2>/dev/null; tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$(nproc)" --target tiny_llama >/tmp/build.log 2>&1) || { tail -30 /tmp/build.log; exit 1; }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader; echo "built $(el) s; $(git log --oneline -1 2>/dev/null)"
Q=timestamp,index,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active
nvidia-smi --query-gpu=$Q --format=csv >/dev/null 2>&1 || Q=timestamp,index,clocks.sm,clocks.mem,power.draw,temperature.gpu
nvidia-smi --query-gpu=$Q --format=csv -lms 100 > $L/smi.csv 2>&1 & SMI=$!
T="build/tiny_llama --device cuda --version v4 --use-amp --preset gpt2-small --log-every 1000 --timing-warmup-steps 10"
avg() { echo "$(grep -E 'Average batch time' $1 | sed 's/Average batch time: //')"; }
mark() { echo "$(date +%s.%N) $1" >> $L/marks.txt; }
for rep in 1 2; do
  for g in 0 1; do n=one_gpu${g}_$rep; mark "start $n"; CUDA_VISIBLE_DEVICES=$g timeout 60 $T --num-steps 60 > $L/$n.log 2>&1; mark "end $n"; echo "$n: $(avg $L/$n.log)"; done
  n=two_at_once_$rep; mark "start $n"
  CUDA_VISIBLE_DEVICES=0 timeout 60 $T --num-steps 60 > $L/${n}_gpu0.log 2>&1 & P0=$!
  CUDA_VISIBLE_DEVICES=1 timeout 60 $T --num-steps 60 > $L/${n}_gpu1.log 2>&1 & P1=$!
  wait $P0 $P1; mark "end $n"; echo "$n: gpu0 $(avg $L/${n}_gpu0.log); gpu1 $(avg $L/${n}_gpu1.log)"
  n=zero1_$rep; mark "start $n"; timeout 90 $T --num-steps 60 --nproc-per-node 2 --zero 1 --reduce-dtype fp32 > $L/$n.log 2>&1; mark "end $n"; echo "$n: $(avg $L/$n.log)"
done
for n in one_gpu0_300 zero1_300; do extra=""; dev=0; [ $n = zero1_300 ] && extra="--nproc-per-node 2 --zero 1 --reduce-dtype fp32" && dev=0,1
  mark "start $n"; CUDA_VISIBLE_DEVICES=$dev timeout 90 $T --num-steps 300 --log-every 50 $extra > $L/$n.log 2>&1; mark "end $n"
  echo "$n: $(avg $L/$n.log); $(grep -E '^Step' $L/$n.log | awk '{print $NF}' | tr '\n' ' ')"; done
kill $SMI; echo "== clocks done $(el) s"
export CUDA_VISIBLE_DEVICES=0
timeout 100 build/tiny_llama bench --device cuda --levels v4,v5 --precisions bf16 --timing-warmup-steps 5 --steps 10 --repeats 3 --preset gpt2-small --json $L/bench_gpt2.json > $L/bench_gpt2.log 2>&1; grep -E "^v[0-9]" $L/bench_gpt2.log
PYTHONUNBUFFERED=1 timeout 120 python3 tools/pytorch_reference.py --preset gpt2-small --vocab-size 50257 --vocab-multiple 128 \
  --modes compile+graph --precisions bf16 --steps 10 --repeats 3 --json $L/pytorch_gpt2.json > $L/pytorch_gpt2.log 2>&1; echo "rc $?"; grep -E "^pytorch|Error" $L/pytorch_gpt2.log
echo "== medium $(el) s"
timeout 60 build/tiny_llama bench --device cuda --levels v4,v5 --precisions bf16 --timing-warmup-steps 5 --steps 10 --repeats 3 --preset medium --json $L/bench_medium.json > $L/bench_medium.log 2>&1; grep -E "^v[0-9]" $L/bench_medium.log
PYTHONUNBUFFERED=1 timeout 100 python3 tools/pytorch_reference.py --preset medium --vocab-size 1000 --vocab-multiple 128 \
  --modes compile+graph --precisions bf16 --steps 10 --repeats 3 --json $L/pytorch_medium.json > $L/pytorch_medium.log 2>&1; echo "rc $?"; grep -E "^pytorch|Error" $L/pytorch_medium.log
echo "== default $(el) s"
timeout 60 build/tiny_llama bench --device cuda --levels v4,v5 --precisions bf16 --repeats 3 --json $L/bench_default.json > $L/bench_default.log 2>&1; grep -E "^v[0-9]" $L/bench_default.log
echo "== done $(el) s"
