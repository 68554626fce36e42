#!/usr/bin/env bash
# Call 4: the fused backward with bulk adds: its tests, then a v5 profile with and without it.
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
N=$(nproc)
L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$N" --target tiny_llama gpu_tests >/tmp/build.log 2>&1) || { grep -B2 -A10 "error" /tmp/build.log | head -60; exit 1; }
echo "== tests $(date +%T)"
(cd build && timeout 120 ctest -R "GpuAttention|GpuKernelCheck" -j 4 --timeout 110 --output-on-failure > $L/gpu-tests.log 2>&1); echo "rc $?"
grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)" $L/gpu-tests.log | head; grep -E "Failure|Which is|differ" $L/gpu-tests.log | head -20
for v in on off; do
  flag=""; [ $v = off ] && flag="--disable-fused-attention-backward"
  timeout 60 build/tiny_llama --device cuda --version v5 --use-amp --preset gpt2-small --num-steps 9 --timing-warmup-steps 6 \
    --profile-steps 2 --log-every 100 --profile $OUT/prof $flag > $L/prof_$v.log 2>&1; echo "$v rc $?"; rm -rf $OUT/prof
  grep -E "measured|flash_|  attention " $L/prof_$v.log | head -8
done
