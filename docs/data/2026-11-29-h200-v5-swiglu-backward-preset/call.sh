#!/usr/bin/env bash
# One H200, HEAD (.dev/head.tgz, built in /tmp/tree): the whole GPU suite; v4 against v5 at 8 x 128
# (twice) and 8 x 256; the v5 headers; a v5 profile at the default shape.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
rm -rf /tmp/tree && mkdir -p /tmp/tree && tar xzf .dev/head.tgz -C /tmp/tree && cd /tmp/tree
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$(nproc)" >/tmp/build.log 2>&1) || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader; echo "built $(el) s"
for rep in 1 2; do
  timeout 90 build/tiny_llama bench --device cuda --levels v4,v5 --precisions bf16 --repeats 3 --json $L/T128_$rep.json > $L/T128_$rep.log 2>&1
  echo "T128 $rep: $(grep -E '^v[45] ' $L/T128_$rep.log | awk '{print $1, $5, $6}' | paste -sd' ')"
done
timeout 90 build/tiny_llama bench --device cuda --levels v4,v5 --precisions bf16 --repeats 3 --seq-lens 256 --json $L/T256.json > $L/T256.log 2>&1
echo "T256: $(grep -E '^v[45] ' $L/T256.log | awk '{print $1, $5, $6}' | paste -sd' ')"
for T in 128 256; do timeout 60 build/tiny_llama --device cuda --version v5 --use-amp --num-steps 3 --seq-len $T > $L/header_T$T.log 2>&1; grep -E "Products" $L/header_T$T.log; done
timeout 90 build/tiny_llama --device cuda --version v5 --use-amp --seq-len 128 --num-steps 15 --timing-warmup-steps 10 --profile-steps 3 --profile $L/profile_v5 > $L/profile_v5.log 2>&1; echo "profile rc $?"
grep -E "^  [0-9.]+ = |Kernel launches" $L/profile_v5.log | head -4; grep -A14 "Kernel time by family" $L/profile_v5.log | head -16
echo "== suite $(el) s"
cd build
t=$(( 585 - ($(date +%s) - T0) ))
T1=$(date +%s); timeout $t ctest -L "^gpu$" -j 10 --timeout 250 --output-on-failure > $L/gpu-tests.log 2>&1; echo "rc $? in $(( $(date +%s) - T1 )) s"
grep -E "tests passed|tests failed|Total Test time|\*\*\*Failed|\(Failed\)|\(Timeout\)|Not Run" $L/gpu-tests.log | head -20
echo "== done $(el) s"
