#!/usr/bin/env bash
# One H200: the last layers' and the embedding's updates at the main stream's priority (on the
# communication lane, idle on one GPU; .dev/hi-buckets.patch, TT_HI_BUCKETS=k), v6 and v4 at the
# default shape, alternating two rounds; 20 steps' losses; the tail of a profiled step.
set -uo pipefail
export CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
git log --oneline -1 > $L/commit.txt; git status --short >> $L/commit.txt
git apply .dev/hi-buckets.patch || exit 1
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 16 --target tiny_llama >/tmp/build.log 2>&1 || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
echo "built $(el) s"
B="build/tiny_llama bench --device cuda --levels v4,v6 --precisions bf16 --batch-sizes 8 --seq-lens 128 --repeats 3"
run() { local name=$1; shift; env "$@" timeout 60 $B > $L/bench_${name}_$R.log 2>&1; echo "$name r$R $(grep -E '^v[46] ' $L/bench_${name}_$R.log | awk '{print $1, $5}' | tr '\n' ' ')"; }
for R in 1 2; do run base TT_X=0; run hi0 TT_HI_BUCKETS=0; run hi1 TT_HI_BUCKETS=1; run hi2 TT_HI_BUCKETS=2; run hi4 TT_HI_BUCKETS=4; echo "round $R $(el) s"; done
S="build/tiny_llama --device cuda --version v6 --use-amp --seq-len 128 --num-steps 20 --log-every 1"
timeout 60 $S > $L/bits_base.log 2>&1; TT_HI_BUCKETS=2 timeout 60 $S > $L/bits_hi2.log 2>&1
cmp <(grep -o "Loss: [0-9.]*" $L/bits_base.log) <(grep -o "Loss: [0-9.]*" $L/bits_hi2.log) && echo "hi2 losses the same ($(grep -c 'Loss:' $L/bits_base.log) lines)"
P="build/tiny_llama --device cuda --version v6 --use-amp --seq-len 128 --num-steps 15 --timing-warmup-steps 10 --profile-steps 3"
TT_HI_BUCKETS=1 timeout 60 $P --profile $L/prof_hi1 > $L/prof_hi1.log 2>&1; grep -E "^\s+[0-9.]+ = " $L/prof_hi1.log
python3 .dev/tail.py $L/prof_hi1/trace.json > $L/tail_hi1.txt; tail -9 $L/tail_hi1.txt; gzip $L/prof_hi1/trace.json
echo "== done $(el) s"
