#!/usr/bin/env bash
# One H200: (1) v6.md exercise 12's command from the root, as written; (2) AdamW beside the backward:
# the shared-memory carveout (AdamW's, every kernel of ours) and unused dynamic shared memory that
# holds AdamW to fewer blocks an SM (.dev/carve.patch, env switches), v6 at the default shape,
# alternating two rounds; the losses of 20 steps; a profile of one variant.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
git log --oneline -1 > $L/commit.txt; git status --short >> $L/commit.txt
git apply .dev/carve.patch || exit 1
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 16 --target tiny_llama >/tmp/build.log 2>&1) &
BP=$!
(nvcc -std=c++17 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -O3 -Isrc \
    docs/data/2026-11-30-h200-second-product-cluster-split/pairs/cluster_down.cu -o cdown -lcublas && timeout 60 ./cdown 2048) > $L/exercise12.log 2>&1
echo "exercise 12 rc $? $(el) s"; cut -c1-120 $L/exercise12.log | head -30; rm -f cdown
wait $BP || { grep -B2 -A12 "error" /tmp/build.log | head -40; exit 1; }
echo "built $(el) s"
B="build/tiny_llama bench --device cuda --levels v6 --precisions bf16 --batch-sizes 8 --seq-lens 128 --repeats 3"
run() { local name=$1; shift; env "$@" timeout 60 $B > $L/bench_${name}_$R.log 2>&1; echo "$name r$R $(grep -E '^v6 ' $L/bench_${name}_$R.log | awk '{print $5, $6}')"; }
for R in 1 2; do
  run base TT_X=0; run ac100 TT_ADAMW_CARVE=100; run all100 TT_CARVE_ALL=100; run all100s5 TT_CARVE_ALL=100 TT_ADAMW_SMEM=40960
  run all100s4 TT_CARVE_ALL=100 TT_ADAMW_SMEM=51200; run all100s3 TT_CARVE_ALL=100 TT_ADAMW_SMEM=67584; run ac0 TT_ADAMW_CARVE=0
  echo "round $R $(el) s"
done
S="build/tiny_llama --device cuda --version v6 --use-amp --seq-len 128 --num-steps 20 --log-every 1"
timeout 60 $S > $L/bits_base.log 2>&1; TT_CARVE_ALL=100 TT_ADAMW_SMEM=51200 timeout 60 $S > $L/bits_all100s4.log 2>&1
cmp <(grep -o "Loss: [0-9.]*" $L/bits_base.log) <(grep -o "Loss: [0-9.]*" $L/bits_all100s4.log) && echo "all100s4 losses the same ($(grep -c 'Loss:' $L/bits_base.log) lines)"
P="build/tiny_llama --device cuda --version v6 --use-amp --seq-len 128 --num-steps 15 --timing-warmup-steps 10 --profile-steps 3"
timeout 60 $P --profile $L/prof_base > $L/prof_base.log 2>&1
TT_CARVE_ALL=100 timeout 60 $P --profile $L/prof_all100 > $L/prof_all100.log 2>&1
for v in base all100; do grep -E "^\s+[0-9.]+ = " $L/prof_$v.log | head -1; done
rm -f $L/prof_*/trace.json
echo "== done $(el) s"
