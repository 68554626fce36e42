#!/usr/bin/env bash
# One H200: blocks-forward-in-one-launch with each task's times printed (.dev/trace-tasks.patch, a
# measurement), three steps of v6; .dev/tasks.py on the last launch.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
git apply .dev/trace-tasks.patch || exit 1
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 16 --target tiny_llama >/tmp/build.log 2>&1 || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"
TT_TASK_TRACE=$L/tasks.log timeout 60 build/tiny_llama --device cuda --version v6 --use-amp --seq-len 128 --num-steps 3 --enable blocks-forward-in-one-launch --disable cuda-graph > $L/run.log 2>&1; echo "rc $? $(grep -c TASK $L/tasks.log) lines"; tail -3 $L/run.log
python3 .dev/tasks.py $L/tasks.log
gzip $L/tasks.log
echo "== done $(el) s"
