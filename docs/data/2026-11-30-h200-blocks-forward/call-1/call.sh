#!/usr/bin/env bash
# One H200: blocks-forward-in-one-launch built and checked (its test and the tiles' tests), v6 with
# and without it alternating, a profile with it, memcheck on two steps.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
git log --oneline -1 > $L/commit.txt; git status --short >> $L/commit.txt
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 16 --target tiny_llama gpu_tests >/tmp/build.log 2>&1 || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"
timeout 150 build/tests/gpu_tests --gtest_filter='Fp8Model.BlocksForward*:Fp8Model.RopeInQkv*:Fp8Model.SwigluInGateUp*:GpuRopeProduct*:GpuGatedProduct*:GpuAttention*' > $L/tests.log 2>&1; echo "tests rc $? $(el) s"; grep -E "^\[  (PASSED|FAILED) |Failure|Expected|Which is|actual|^  " $L/tests.log | head -40
S="build/tiny_llama --device cuda --version v6 --use-amp --seq-len 128 --num-steps 20 --log-every 1"
timeout 60 $S > $L/bits_off.log 2>&1; echo "off rc $?"; timeout 60 $S --enable blocks-forward-in-one-launch > $L/bits_on.log 2>&1; echo "on rc $?"
grep -E "Products|rror" $L/bits_on.log | head -5
paste <(grep -o "Loss: [0-9.]*" $L/bits_off.log) <(grep -o "Loss: [0-9.]*" $L/bits_on.log) | head -20
B="build/tiny_llama bench --device cuda --levels v6 --precisions bf16 --batch-sizes 8 --seq-lens 128 --repeats 3"
for R in 1 2; do
  timeout 60 $B > $L/bench_off_$R.log 2>&1; timeout 60 $B --enable blocks-forward-in-one-launch > $L/bench_on_$R.log 2>&1
  echo "round $R off $(grep -E '^v6 ' $L/bench_off_$R.log | awk '{print $5}') on $(grep -E '^v6 ' $L/bench_on_$R.log | awk '{print $5}') $(el) s"
done
tail -5 $L/bench_on_1.log
P="build/tiny_llama --device cuda --version v6 --use-amp --seq-len 128 --num-steps 15 --timing-warmup-steps 10 --profile-steps 3"
timeout 60 $P --profile $L/prof_on --enable blocks-forward-in-one-launch > $L/prof_on.log 2>&1; grep -E "^\s+[0-9.]+ = " $L/prof_on.log
timeout 60 $P --profile $L/prof_off > $L/prof_off.log 2>&1; grep -E "^\s+[0-9.]+ = " $L/prof_off.log
python3 - $L/prof_on/trace.json $L/prof_off/trace.json <<'PY'
import json, sys
for p in sys.argv[1:]:
    ev = json.load(open(p)); ev = ev.get('traceEvents', ev)
    k = [e for e in ev if e.get('ph') == 'X' and 'kernel' in str(e.get('cat', '')).lower() + str(e.get('name', '')).lower()]
    blk = [e['dur'] for e in k if 'block_forward' in e['name']]
    print(p.split('/')[-2], 'block kernel us:', [round(d, 1) for d in blk][:6])
PY
gzip $L/prof_on/trace.json $L/prof_off/trace.json
timeout 150 compute-sanitizer --tool memcheck build/tiny_llama --device cuda --version v6 --use-amp --seq-len 128 --num-steps 2 --enable blocks-forward-in-one-launch > $L/memcheck.log 2>&1; echo "memcheck rc $? $(el) s"; grep -E "ERROR SUMMARY|Invalid" $L/memcheck.log | head -5
echo "== done $(el) s"
