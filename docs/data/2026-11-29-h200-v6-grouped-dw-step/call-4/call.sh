#!/usr/bin/env bash
set -uo pipefail
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
[ -x build/tiny_llama ] || (cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$(nproc)" --target tiny_llama >/tmp/build.log 2>&1) || exit 1
echo "built $(el) s"
for sw in off on; do f=""; [ $sw = on ] && f="--enable-grouped-weight-gradients"
  timeout 60 build/tiny_llama --device cuda --version v5 --use-amp --seq-len 128 --num-steps 15 --timing-warmup-steps 10 --profile-steps 3 --profile $L/profile_$sw $f > $L/profile_$sw.log 2>&1
  echo "== $sw"; grep -E "Products|Kernel launches|^  [0-9.]+ = " $L/profile_$sw.log | head -3
  grep -E "grouped_gemm|nvjet|memcpy|Memcpy" $L/profile_$sw/kernels.csv | head -8
done
echo "== done $(el) s"
