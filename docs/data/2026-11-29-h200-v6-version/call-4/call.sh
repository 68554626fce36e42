#!/usr/bin/env bash
# One H200: racecheck's hazards of call 3 (in cuBLAS's nvjet kernels): the same run at v5, and v6
# with cuBLAS's kernels left out; v6's header at gpt2-small.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 32 --target tiny_llama >/tmp/build.log 2>&1) || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"; compute-sanitizer --version | tail -1
run="build/tiny_llama --device cuda --use-amp --num-steps 2 --batch-size 2 --seq-len 128 --log-every 1"
timeout 90 compute-sanitizer --tool racecheck --error-exitcode 3 $run --version v5 > $L/racecheck_v5.log 2>&1
echo "v5 racecheck rc $? $(grep -E 'RACECHECK SUMMARY' $L/racecheck_v5.log)"; grep -E "Race reported" $L/racecheck_v5.log | sed -E 's/\+0x[0-9a-f]+//g' | sort | uniq -c
timeout 90 compute-sanitizer --tool racecheck --error-exitcode 3 --kernel-name-exclude kns=nvjet $run --version v6 > $L/racecheck_v6_ours.log 2>&1
echo "v6 without nvjet rc $? $(grep -E 'RACECHECK SUMMARY' $L/racecheck_v6_ours.log)"; grep -E "Race reported|rror" $L/racecheck_v6_ours.log | head -5
timeout 90 compute-sanitizer --tool racecheck --error-exitcode 3 --kernel-name kns=qkv_rope $run --version v6 > $L/racecheck_v6_rope.log 2>&1
echo "v6 qkv_rope only rc $? $(grep -E 'RACECHECK SUMMARY' $L/racecheck_v6_rope.log)"
timeout 90 build/tiny_llama --device cuda --version v6 --use-amp --preset gpt2-small --num-steps 2 --log-every 1 > $L/gpt2_small_v6.log 2>&1; echo "gpt2-small rc $?"; grep -E "^(Attention|Products)" $L/gpt2_small_v6.log
echo "== done $(el) s"
