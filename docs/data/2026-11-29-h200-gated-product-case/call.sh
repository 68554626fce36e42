#!/usr/bin/env bash
# One H200, this tree: the whole GPU suite (the gated_product op case, the refactored v5 switches'
# bit tests, the descriptors moved into hopper.cuh); kernels --check of the new rows; v4 against v5
# at 8 x 128 (twice) and the v5 header.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$(nproc)" >/tmp/build.log 2>&1) || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader; echo "built $(el) s"
timeout 120 build/tiny_llama kernels --check --precision bf16 --ops gated_product > $L/kernels-check-bf16.log 2>&1; echo "check rc $?"; tail -8 $L/kernels-check-bf16.log
timeout 120 build/tiny_llama kernels --precision bf16 --ops gated_product,linear,swiglu --levels v4,v5 --seq-lens 1024 > $L/kernels-bf16.log 2>&1; echo "kernels rc $?"; grep -E "gated|linear|swiglu" $L/kernels-bf16.log | head -16
for rep in 1 2; do
  timeout 90 build/tiny_llama bench --device cuda --levels v4,v5 --precisions bf16 --repeats 3 --json $L/T128_$rep.json > $L/T128_$rep.log 2>&1
  echo "T128 $rep: $(grep -E '^v[45] ' $L/T128_$rep.log | awk '{print $1, $5, $6}' | paste -sd' ')"
done
timeout 60 build/tiny_llama --device cuda --version v5 --use-amp --num-steps 3 > $L/header.log 2>&1; grep -E "Products" $L/header.log
echo "== suite $(el) s"
cd build
t=$(( 585 - ($(date +%s) - T0) ))
T1=$(date +%s); timeout $t ctest -L "^gpu$" -j 10 --timeout 250 --output-on-failure > $L/gpu-tests.log 2>&1; echo "rc $? in $(( $(date +%s) - T1 )) s"
grep -E "tests passed|tests failed|Total Test time|\*\*\*Failed|\(Failed\)|\(Timeout\)|Not Run" $L/gpu-tests.log | head -20
echo "== done $(el) s"
