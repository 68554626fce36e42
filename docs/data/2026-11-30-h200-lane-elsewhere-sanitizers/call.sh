#!/usr/bin/env bash
# One H200 at 35604a9: compute-sanitizer (memcheck, initcheck, racecheck) on v6 with the weight
# gradients beside; the lane on and off at 1 x 4096, 8 x 1024 and 16 x 1024; and v3/v4 in fp32 with
# RMSNorm's backward as it is against its form before a1a70ca (the early loads), alternating.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
git log --oneline -1 > $L/commit.txt; git status --short >> $L/commit.txt
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 16 --target tiny_llama >/tmp/build.log 2>&1 || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"
O=/tmp/old; rm -rf $O; mkdir -p $O; git ls-files | grep -v "^docs/data/" | xargs -I{} cp --parents {} $O/ 2>/dev/null
git show a1a70ca^:src/ops/rmsnorm.cu > $O/src/ops/rmsnorm.cu
(cd $O && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg_old.log 2>&1 && cmake --build build -j 8 --target tiny_llama > /tmp/build_old.log 2>&1; echo "old rc $?" >> /tmp/build_old.log) &
OLD=$!
for T in memcheck initcheck racecheck; do
  timeout 200 compute-sanitizer --tool $T --error-exitcode 3 build/tiny_llama --device cuda --version v6 --use-amp --num-steps 3 --batch-size 2 --seq-len 128 > $L/san_$T.log 2>&1
  echo "$T rc $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $L/san_$T.log | tail -1) $(el) s"
done
grep -h "weight gradients" $L/san_memcheck.log | head -1 | grep -o "weight gradients[^;]*"
wait $OLD; tail -1 /tmp/build_old.log; echo "old built $(el) s"
B="build/tiny_llama bench --device cuda --precisions bf16 --levels v6 --repeats 3"
for S in "1 4096" "8 1024" "16 1024"; do set -- $S
  for R in 1 2; do
    timeout 60 $B --batch-sizes $1 --seq-lens $2 > $L/on_${1}x${2}_$R.log 2>&1
    timeout 60 $B --batch-sizes $1 --seq-lens $2 --disable weight-gradients-behind > $L/off_${1}x${2}_$R.log 2>&1
    echo "$1x$2 round $R: on $(grep -E '^v6 ' $L/on_${1}x${2}_$R.log | awk '{print $5, $6}') off $(grep -E '^v6 ' $L/off_${1}x${2}_$R.log | awk '{print $5, $6}') $(el) s"
  done
done
for S in "1 4096" "16 1024"; do set -- $S
  timeout 60 build/tiny_llama --device cuda --version v6 --use-amp --num-steps 3 --batch-size $1 --seq-len $2 > $L/header_${1}x$2.log 2>&1; grep -o "weight gradients[^;]*" $L/header_${1}x$2.log
done
F="bench --device cuda --precisions fp32 --levels v3,v4 --repeats 5 --batch-sizes 8 --seq-lens 128"
for R in 1 2; do
  timeout 60 build/tiny_llama $F > $L/fp32_now_$R.log 2>&1
  timeout 60 $O/build/tiny_llama $F > $L/fp32_before_$R.log 2>&1
  echo "fp32 round $R: now $(grep -E '^v[34] ' $L/fp32_now_$R.log | awk '{print $1, $5}' | tr '\n' ' ') before $(grep -E '^v[34] ' $L/fp32_before_$R.log | awk '{print $1, $5}' | tr '\n' ' ') $(el) s"
done
echo "== done $(el) s"
