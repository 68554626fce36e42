#!/usr/bin/env bash
# One H200, the working tree (HEAD + the residual gradient's second buffer for the grouped weight
# gradients): build, the whole GPU suite at ten at a time, then the default shape with and without
# --enable-grouped-weight-gradients (alternating), and a profile with it.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$(nproc)" >/tmp/build.log 2>&1) || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader; echo "built $(el) s"
(cd build && timeout 330 ctest -L "^gpu$" -j 10 --timeout 250 --output-on-failure > $L/gpu-tests.log 2>&1); echo "tests rc $? at $(el) s"
grep -E "tests passed|tests failed|Total Test time|\(Failed\)|\(Timeout\)|Not Run" $L/gpu-tests.log | head -20
echo "== bench $(el) s"
for rep in 1 2 3; do
  for sw in off on; do
    f=""; [ $sw = on ] && f="--enable-grouped-weight-gradients"
    timeout 60 build/tiny_llama bench --device cuda --levels v5 --precisions bf16 --repeats 3 $f --json $L/default_${sw}_$rep.json > $L/default_${sw}_$rep.log 2>&1
    echo "$sw $rep: $(grep -E '^v5 ' $L/default_${sw}_$rep.log | awk '{print $5, $6}')"
  done
done
echo "== profile $(el) s"
timeout 90 build/tiny_llama --device cuda --version v5 --use-amp --seq-len 128 --num-steps 15 --timing-warmup-steps 10 --profile-steps 3 --profile $L/profile_on --enable-grouped-weight-gradients > $L/profile_on.log 2>&1; echo "profile rc $?"
grep -E "Kernel launches|^  [0-9.]+ = |copies and fills|grouped_gemm" $L/profile_on.log | head -8
echo "== done $(el) s"
