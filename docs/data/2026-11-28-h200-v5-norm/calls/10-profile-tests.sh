#!/usr/bin/env bash
# Last call: the v5 profile at gpt2-small, then as many GPU tests as the time left allows.
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
N=$(nproc); T0=$(date +%s)
L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$N" --target tiny_llama gpu_tests >/tmp/build.log 2>&1) || { grep -B2 -A10 "error" /tmp/build.log | head -60; exit 1; }
echo "== profile $(date +%T)"
timeout 60 build/tiny_llama --device cuda --version v5 --use-amp --preset gpt2-small --num-steps 9 --timing-warmup-steps 6 \
  --profile-steps 2 --log-every 100 --profile $OUT/prof --flops-profile > $L/profile_v5_gpt2.log 2>&1; echo "rc $?"; rm -rf $OUT/prof
sed -n "/Where each/,/Model FLOPs/p" $L/profile_v5_gpt2.log | grep -vE "^\s+[0-9.]+%\s" | head -36
t=$(( 330 - ($(date +%s) - T0) ))
echo "== GPU tests $(date +%T), $t s"
(cd build && timeout $t ctest -L "^gpu$" -j 6 --timeout 200 > $L/gpu-tests.log 2>&1); echo "rc $?"
grep -cE "Test +#.*Passed" $L/gpu-tests.log; grep -E "\*\*\*Failed|\(Failed\)|Timeout" $L/gpu-tests.log | head
