#!/usr/bin/env bash
# One H200: every kernels row of v4, v5 and v6 at the default shape, launched plainly and
# programmatically, for the table of each kernel alone against in the step.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 32 --target tiny_llama >/tmp/build.log 2>&1) || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"
for mode in plain programmatic; do
  flag=""; [ $mode = programmatic ] && flag=--programmatic
  timeout 200 build/tiny_llama kernels --levels v4,v5,v6 --seq-lens 1024 --repeats 20 $flag --json $L/kernels_$mode.json --csv $L/kernels_$mode.csv > $L/kernels_$mode.log 2>&1
  echo "kernels $mode rc $? $(el) s"; grep -E "B8 T128" $L/kernels_$mode.log | head -40
done
timeout 40 build/tiny_llama --device cuda --version v6 --use-amp --seq-len 128 --num-steps 15 --timing-warmup-steps 10 --profile-steps 3 --profile $L/profile_v6 > $L/profile_v6.log 2>&1
echo "profile: $(grep -m1 -E 'busy' $L/profile_v6.log)"; rm -f $L/profile_v6/trace.json
echo "== done $(el) s"
