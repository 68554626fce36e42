#!/usr/bin/env bash
# Two H200s. 1) The whole GPU suite at HEAD (7babfde's misfit strings first run on a GPU) and every
# version on two ranks. 2) AdamW, a measurement patch (.dev/adamw-vec.patch): float4 groups, U in
# flight a thread, the grid capped; v6 at the default shape, variants alternating two rounds, and
# the losses of 20 steps against the committed kernel.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
git log --oneline -1 > $L/commit.txt; git status --short >> $L/commit.txt
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 28 >/tmp/build.log 2>&1 || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"
(cd build && timeout 300 ctest -L "^gpu$" -j 10 --timeout 250 --output-on-failure > $L/gpu-suite.log 2>&1); echo "suite rc $? $(el) s"; grep -E "tests passed|\(Failed\)|\*\*\*Failed" $L/gpu-suite.log | head -20
CUDA_VISIBLE_DEVICES=0,1 timeout 150 build/tests/multigpu_tests --gtest_filter='*EveryVersion*/2Gpus' > $L/multigpu.log 2>&1; echo "multigpu rc $? $(el) s"; grep -E "^\[  (PASSED|FAILED) " $L/multigpu.log
git apply .dev/adamw-vec.patch && cmake --build build -j 28 --target tiny_llama >/tmp/build2.log 2>&1 || { tail -30 /tmp/build2.log; exit 1; }
echo "patched $(el) s"
B="build/tiny_llama bench --device cuda --levels v6 --precisions bf16 --batch-sizes 8 --seq-lens 128 --repeats 3"
run() { local name=$1; shift; env "$@" timeout 60 $B > $L/bench_${name}_$R.log 2>&1; echo "$name r$R $(grep -E '^v6 ' $L/bench_${name}_$R.log | awk '{print $5, $6}')"; }
for R in 1 2; do
  run base TT_X=0; run u1 TT_ADAMW_UNROLL=1; run u2 TT_ADAMW_UNROLL=2; run u2c132 TT_ADAMW_UNROLL=2 TT_ADAMW_BLOCKS=132
  run u2c264 TT_ADAMW_UNROLL=2 TT_ADAMW_BLOCKS=264; run u4c132 TT_ADAMW_UNROLL=4 TT_ADAMW_BLOCKS=132; run u1c528 TT_ADAMW_UNROLL=1 TT_ADAMW_BLOCKS=528
  echo "round $R $(el) s"
done
S="build/tiny_llama --device cuda --version v6 --use-amp --seq-len 128 --num-steps 20 --log-every 1"
timeout 60 $S > $L/bits_base.log 2>&1; TT_ADAMW_UNROLL=2 TT_ADAMW_BLOCKS=132 timeout 60 $S > $L/bits_u2c132.log 2>&1
TT_ADAMW_UNROLL=1 timeout 60 $S > $L/bits_u1.log 2>&1
for v in u2c132 u1; do cmp <(grep -o "Loss: [0-9.]*" $L/bits_base.log) <(grep -o "Loss: [0-9.]*" $L/bits_$v.log) && echo "$v losses the same ($(grep -c 'Loss:' $L/bits_$v.log) lines)"; done
TT_ADAMW_UNROLL=2 TT_ADAMW_BLOCKS=132 timeout 60 build/tiny_llama --device cuda --version v6 --use-amp --seq-len 128 --num-steps 15 --timing-warmup-steps 10 --profile-steps 3 --profile $L/prof_u2c132 > $L/prof_u2c132.log 2>&1 </dev/null &
wait; echo "== done $(el) s"
