#!/usr/bin/env bash
# One H200: "optimizer alone" counting the updates behind the backward (trace.cpp's in_optimizer):
# the GPU profile tests, then the profile line of v6 and v4 at the default shape and of v5 at
# gpt2-small, and the tail of v6's step from its trace.
set -uo pipefail
export CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
git log --oneline -1 > $L/commit.txt; git status --short >> $L/commit.txt
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 16 --target tiny_llama gpu_tests >/tmp/build.log 2>&1 || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
echo "built $(el) s"
timeout 200 build/tests/gpu_tests --gtest_filter='*GpuProfile*' > $L/gpu_profile_tests.log 2>&1; echo "profile tests rc $? $(el) s"; grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $L/gpu_profile_tests.log
D="--device cuda --use-amp --timing-warmup-steps 10 --profile-steps 3"
for v in 6 4; do timeout 60 build/tiny_llama $D --version v$v --seq-len 128 --num-steps 15 --profile $L/prof_v$v > $L/prof_v$v.log 2>&1; echo "v$v default:"; grep -E "^\s+[0-9.]+ = " $L/prof_v$v.log; done
timeout 120 build/tiny_llama --device cuda --use-amp --version v5 --preset gpt2-small --num-steps 9 --timing-warmup-steps 6 --profile-steps 2 --profile $L/prof_gpt2 > $L/prof_gpt2.log 2>&1; echo "v5 gpt2-small:"; grep -E "^\s+[0-9.]+ = " $L/prof_gpt2.log
python3 .dev/tail.py $L/prof_v6/trace.json > $L/tail_v6.txt; tail -8 $L/tail_v6.txt
for d in $L/prof_*; do gzip -f $d/trace.json; done
echo "== done $(el) s"
