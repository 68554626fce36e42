#!/usr/bin/env bash
# One H200: RMSNorm's backward at 1024 rows with the two-stage weight gradient (partial sums a
# chunk, then a second kernel) instead of column blocks in the same launch; v6 and v5 steps
# alternating, three rounds, and a profile of each.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 32 --target tiny_llama >/tmp/build.log 2>&1) || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
cp build/tiny_llama /tmp/tl-cols
sed -i 's/constexpr int64_t kDwColumnRows = 6 \* kThreads;/constexpr int64_t kDwColumnRows = 0;/' src/ops/rmsnorm.cu
grep -n "kDwColumnRows = " src/ops/rmsnorm.cu
cmake --build build -j 32 --target tiny_llama >/tmp/build2.log 2>&1 || { tail -20 /tmp/build2.log; exit 1; }
cp build/tiny_llama /tmp/tl-two
git checkout src/ops/rmsnorm.cu
echo "built $(el) s"
for rep in 1 2 3; do
  line="round $rep:"
  for V in cols two; do
    timeout 60 /tmp/tl-$V bench --device cuda --levels v5,v6 --precisions bf16 --batch-sizes 8 --seq-lens 128 --repeats 3 > $L/${V}_$rep.log 2>&1
    line="$line $V $(grep -E '^v[56] ' $L/${V}_$rep.log | awk '{print $1, $5}' | tr '\n' ' ')"
  done
  echo "$line"
done
for V in cols two; do
  timeout 60 /tmp/tl-$V --device cuda --version v6 --use-amp --batch-size 8 --seq-len 128 --num-steps 15 --timing-warmup-steps 10 --profile-steps 3 --profile $L/profile_$V > $L/profile_$V.log 2>&1
  echo "$V: $(grep -E '= .* busy' $L/profile_$V.log | head -1)"; grep -E "rmsnorm|rms_dw" $L/profile_$V/kernels.csv
  rm -f $L/profile_$V/trace.json
done
echo "== done $(el) s"
