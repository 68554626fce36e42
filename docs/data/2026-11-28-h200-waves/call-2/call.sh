#!/usr/bin/env bash
# The top-10 table's waves column: GpuProfile, then the excerpts (v4 at 8 x 128, v4 gpt2-small).
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
N=$(nproc); T0=$(date +%s)
L=$OUT/logs; mkdir -p $L
trap 'rm -f $L/*/trace.json; tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$N" --target tiny_llama gpu_tests >/tmp/build.log 2>&1) || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
echo "built $(( $(date +%s) - T0 )) s"
timeout 200 build/tests/gpu_tests --gtest_filter='*GpuProfile*' > $L/tests.log 2>&1; echo "tests rc $? $(tail -1 $L/tests.log)"; grep -E "FAILED|Failure" $L/tests.log | head
for run in "v4_default:--version v4 --seq-len 128 --num-steps 15 --timing-warmup-steps 10 --profile-steps 3" \
           "v1_default:--version v1 --seq-len 128 --num-steps 15 --timing-warmup-steps 10 --profile-steps 3" \
           "v4_gpt2:--version v4 --preset gpt2-small --num-steps 9 --timing-warmup-steps 6 --profile-steps 2"; do
  n=${run%%:*}
  timeout 100 build/tiny_llama --device cuda --use-amp ${run#*:} --log-every 100 --profile $L/profile_$n > $L/profile_$n.log 2>&1 || tail -5 $L/profile_$n.log
  echo "== $n"; sed -n '/Kernel launches/,/under one wave/p' $L/profile_$n.log
done
echo "== done $(( $(date +%s) - T0 )) s"
