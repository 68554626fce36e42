#!/usr/bin/env bash
# The multigpu tests at this code, then the default shape with accumulation, ring against window.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$(nproc)" >/tmp/build.log 2>&1) || { tail -30 /tmp/cfg.log /tmp/build.log; exit 1; }
L=$OUT/logs; mkdir -p $L; G=$(nvidia-smi -L | wc -l)
echo "== multigpu tests $(date +%T)"
(cd build && timeout 330 ctest -L multigpu --output-on-failure > $L/multigpu.log 2>&1)
grep -E "tests passed|tests failed|Test +#" $L/multigpu.log | head -30
grep -E "Failure|Expected|Which is|actual|\[ killed|\[ signal|\[ error" $L/multigpu.log | head -30
for v in "NCCL_WIN_ENABLE=0" "NCCL_WIN_ENABLE=1"; do
  echo "== default --grad-accum-steps 4 $v $(date +%T)"
  env $v timeout 300 build/tiny_llama bench --nproc-per-node $G --device cuda --version v4 --use-amp --batch-size 8 --seq-len 128 --grad-accum-steps 4 \
    --num-steps 60 --timing-warmup-steps 10 --log-every 1000 --json $L/default_accum4_${v//[^0-9A-Za-z]/_}.json > $L/default_accum4_${v//[^0-9A-Za-z]/_}.log 2>&1 || tail $L/default_accum4_${v//[^0-9A-Za-z]/_}.log
  grep -E "^\|" $L/default_accum4_${v//[^0-9A-Za-z]/_}.log
done
tar czf $OUT/logs.tgz -C $L . && rm -rf $L
echo "== done $(date +%T)"
