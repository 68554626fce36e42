#!/usr/bin/env bash
# One H200: blocks-forward-in-one-launch with tiles of 128 x 32 and release/acquire counters: its
# test; each task's times (.dev/trace-tasks.patch); v6 with and without it alternating; both
# profiled; memcheck and racecheck on two steps.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
git log --oneline -1 > $L/commit.txt; git status --short >> $L/commit.txt
build() { cmake --build build -j 16 --target "$@" >/tmp/build.log 2>&1 || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }; }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1; build tiny_llama gpu_tests
echo "built $(el) s"; cp build/tiny_llama /tmp/tl
timeout 100 build/tests/gpu_tests --gtest_filter='Fp8Model.BlocksForward*:GpuRopeProduct*:GpuGatedProduct*' > $L/tests.log 2>&1; echo "test rc $? $(el) s"; grep -E "^\[  (PASSED|FAILED) |Failure" $L/tests.log | head
B="bench --device cuda --levels v6 --precisions bf16 --batch-sizes 8 --seq-lens 128 --repeats 3"
for R in 1 2 3; do
  timeout 60 /tmp/tl $B > $L/bench_off_$R.log 2>&1; timeout 60 /tmp/tl $B --enable blocks-forward-in-one-launch > $L/bench_on_$R.log 2>&1
  echo "round $R off $(grep -E '^v6 ' $L/bench_off_$R.log | awk '{print $5}') on $(grep -E '^v6 ' $L/bench_on_$R.log | awk '{print $5}') $(el) s"
done
P="--device cuda --version v6 --use-amp --seq-len 128 --num-steps 15 --timing-warmup-steps 10 --profile-steps 3"
timeout 60 /tmp/tl $P --profile $L/prof_on --enable blocks-forward-in-one-launch > $L/prof_on.log 2>&1; grep -E "^\s+[0-9.]+ = " $L/prof_on.log
timeout 60 /tmp/tl $P --profile $L/prof_off > $L/prof_off.log 2>&1; grep -E "^\s+[0-9.]+ = " $L/prof_off.log
python3 - $L/prof_on/trace.json $L/prof_off/trace.json <<'PY'
import json, sys
for p in sys.argv[1:]:
    ev = json.load(open(p)); ev = ev.get('traceEvents', ev) if isinstance(ev, dict) else ev
    regs = [e for e in ev if e.get('ph') == 'X' and e.get('cat') == 'region' and e['name'] == 'forward']
    ks = [e for e in ev if e.get('ph') == 'X' and e.get('cat') == 'kernel']
    spans = []
    for f in regs:
        inside = sorted([k for k in ks if f['ts'] - 1 <= k['ts'] < f['ts'] + f['dur']], key=lambda k: k['ts'])
        first = next(i for i, k in enumerate(inside) if 'rmsnorm' in k['name'])  # the first layer's norm
        last = max(i for i, k in enumerate(inside) if 'gemm' in k['name'] or 'nvjet' in k['name'] or 'rmsnorm' in k['name'])
        spans.append(round(inside[last]['ts'] + inside[last]['dur'] - inside[first]['ts'], 1))
    blk = [round(k['dur'], 1) for k in ks if 'block_forward' in k['name']]
    print(p.split('/')[-2], 'layers (first norm to the final norm) us:', spans, 'block kernel us:', blk)
PY
gzip $L/prof_on/trace.json $L/prof_off/trace.json
git apply .dev/trace-tasks.patch || exit 1; build tiny_llama; echo "traced $(el) s"
TT_TASK_TRACE=$L/tasks.log timeout 60 build/tiny_llama --device cuda --version v6 --use-amp --seq-len 128 --num-steps 3 --enable blocks-forward-in-one-launch --disable cuda-graph > $L/run_trace.log 2>&1; echo "rc $?"; python3 .dev/tasks.py $L/tasks.log 16 | tee $L/tasks.txt; gzip $L/tasks.log
for tool in memcheck racecheck; do
  timeout 200 compute-sanitizer --tool $tool /tmp/tl --device cuda --version v6 --use-amp --seq-len 128 --num-steps 2 --enable blocks-forward-in-one-launch > $L/$tool.log 2>&1; echo "$tool rc $? $(el) s"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Invalid|hazard" $L/$tool.log | head -3
done
echo "== done $(el) s"
