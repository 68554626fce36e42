#!/usr/bin/env bash
# Device call 4 (a clean tree): build, every GPU test, then medium: v4 and v5 beside PyTorch's strongest.
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
N=$(nproc)
T0=$(date +%s)
L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
git status --short | head -5; git log --oneline -1
echo "== build $(date +%T)"
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$N" >/tmp/build.log 2>&1) || { tail -30 /tmp/cfg.log /tmp/build.log; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== GPU tests $(date +%T)"
(cd build && timeout 330 ctest -L "^gpu$" -j 4 --timeout 250 --output-on-failure > $L/gpu-tests.log 2>&1); echo "rc $?"
grep -E "tests passed|tests failed|Total Test time|\*\*\*Failed|\(Failed\)|\(Timeout\)|Not Run" $L/gpu-tests.log | head -20
echo "== medium $(date +%T)"
timeout 60 build/tiny_llama bench --device cuda --levels v4,v5 --precisions bf16 --timing-warmup-steps 5 --steps 10 --repeats 3 --preset medium --json $L/bench_medium.json > $L/bench_medium.log 2>&1; grep -E "^v[0-9]" $L/bench_medium.log
left=$(( 585 - ($(date +%s) - T0) ))
[ $left -gt 30 ] && { PYTHONUNBUFFERED=1 timeout $left python3 tools/pytorch_reference.py --preset medium --vocab-size 1000 --vocab-multiple 128 \
  --modes compile+graph --precisions bf16 --steps 10 --repeats 3 --json $L/pytorch_medium.json > $L/pytorch_medium.log 2>&1; echo "rc $?"; grep -E "^pytorch|Error" $L/pytorch_medium.log; }
echo "== done $(date +%T)"
