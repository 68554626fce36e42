#!/usr/bin/env bash
# One H200. (1) The experiment in the working tree (TT_DEFER: the updates beside the next step's
# forward, or none at all) against the plain step, alternating, at 8 x 128 and 8 x 256. (2) The
# whole GPU suite on HEAD (.dev/head.tgz, built in /tmp/tree), and the v5 headers at 8 x 256 and 8 x 512.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
R=$PWD; T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
rm -rf /tmp/tree && mkdir -p /tmp/tree && tar xzf .dev/head.tgz -C /tmp/tree
( (cd /tmp/tree && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg2.log 2>&1 && cmake --build build -j 10 >/tmp/build2.log 2>&1) || echo "HEAD build failed" ) &
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 6 --target tiny_llama >/tmp/build.log 2>&1) || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
wait
grep -B2 -A12 "error" /tmp/build2.log | head -30
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader; echo "built $(el) s"
for T in 128 256; do
  for rep in 1 2; do
    for d in 0 1 2; do
      TT_DEFER=$d timeout 60 build/tiny_llama bench --device cuda --levels v5 --precisions bf16 --repeats 3 --seq-lens $T --json $L/defer${d}_T${T}_$rep.json > $L/defer${d}_T${T}_$rep.log 2>&1
      echo "T $T defer $d rep $rep: $(grep -E '^v5 ' $L/defer${d}_T${T}_$rep.log | awk '{print $5, $6}')"
    done
  done
done
for d in 0 1; do
  TT_DEFER=$d timeout 90 build/tiny_llama --device cuda --version v5 --use-amp --seq-len 128 --num-steps 15 --timing-warmup-steps 10 --profile-steps 3 --profile $L/profile_defer$d > $L/profile_defer$d.log 2>&1; echo "profile $d rc $?"
  grep -E "^  [0-9.]+ = " $L/profile_defer$d.log | head -3
done
echo "== suite $(el) s"
cd /tmp/tree
for T in 256 512; do timeout 60 build/tiny_llama --device cuda --version v5 --use-amp --num-steps 3 --seq-len $T > $L/header_T$T.log 2>&1; grep -E "Products" $L/header_T$T.log; done
cd build
t=$(( 585 - ($(date +%s) - T0) ))
T1=$(date +%s); timeout $t ctest -L "^gpu$" -j 10 --timeout 250 --output-on-failure > $L/gpu-tests.log 2>&1; echo "rc $? in $(( $(date +%s) - T1 )) s"
grep -E "tests passed|tests failed|Total Test time|\*\*\*Failed|\(Failed\)|\(Timeout\)|Not Run" $L/gpu-tests.log | head -20
echo "== done $(el) s"
