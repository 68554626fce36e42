#!/usr/bin/env bash
# One H200 at 35604a9: where initcheck's reports of uninitialized reads in the forward norm come
# from: v6 eager (no CUDA graph), and v6 with the weight gradients on the main stream.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
git log --oneline -1 > $L/commit.txt; git status --short >> $L/commit.txt
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 16 --target tiny_llama >/tmp/build.log 2>&1 || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"
for V in "eager --disable cuda-graph" "lane_off --disable weight-gradients-behind"; do set -- $V; N=$1; shift
  timeout 95 compute-sanitizer --tool initcheck --print-limit 4 --error-exitcode 3 build/tiny_llama --device cuda --version v6 --use-amp --num-steps 2 --batch-size 2 --seq-len 128 "$@" > $L/initcheck_$N.log 2>&1
  echo "$N rc $? $(grep -E 'ERROR SUMMARY' $L/initcheck_$N.log | tail -1) reports $(grep -c Uninitialized $L/initcheck_$N.log) $(grep -A4 Uninitialized $L/initcheck_$N.log | grep -o 'Device Frame: [^(]*' | sort | uniq -c | head -3 | tr '\n' ' ') $(el) s"
done
echo "== done $(el) s"
