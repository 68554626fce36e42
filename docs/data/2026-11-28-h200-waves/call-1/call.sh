#!/usr/bin/env bash
# The profile's waves line: GpuProfile and the FP8 tests (the chunk helper's committed form), then
# profiles at the default shape (v2, v4, v5 at 8 x 128) and at gpt2-small (v4, v5).
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
N=$(nproc); T0=$(date +%s)
L=$OUT/logs; mkdir -p $L
trap 'rm -f $L/*/trace.json; tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$N" --target tiny_llama gpu_tests >/tmp/build.log 2>&1) || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
echo "built $(( $(date +%s) - T0 )) s"
timeout 250 build/tests/gpu_tests --gtest_filter='*GpuProfile*:Formats/Fp8Quantize.*:Fp8Model.*:GpuKernelCheck*' > $L/tests.log 2>&1; echo "tests rc $? $(tail -1 $L/tests.log)"; grep -E "FAILED|Failure" $L/tests.log | head
for run in "v2_default:--version v2 --seq-len 128 --num-steps 15 --timing-warmup-steps 10 --profile-steps 3" \
           "v4_default:--version v4 --seq-len 128 --num-steps 15 --timing-warmup-steps 10 --profile-steps 3" \
           "v5_default:--version v5 --seq-len 128 --num-steps 15 --timing-warmup-steps 10 --profile-steps 3" \
           "v4_gpt2:--version v4 --preset gpt2-small --num-steps 9 --timing-warmup-steps 6 --profile-steps 2" \
           "v5_gpt2:--version v5 --preset gpt2-small --num-steps 9 --timing-warmup-steps 6 --profile-steps 2"; do
  n=${run%%:*}
  timeout 100 build/tiny_llama --device cuda --use-amp ${run#*:} --log-every 100 --profile $L/profile_$n > $L/profile_$n.log 2>&1 || tail -5 $L/profile_$n.log
  echo "== $n"; grep -E " busy \+ |^Waves|under one wave|Kernel launches" $L/profile_$n.log
done
echo "== done $(( $(date +%s) - T0 )) s"
