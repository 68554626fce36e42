#!/usr/bin/env bash
# One H200 at ec350c9 (grouped weight gradients in tiles of 256 rows, any token count): the whole
# GPU suite, compute-sanitizer on v6, the ladder against PyTorch at 8 x 128 and v4/v5/v6 at 8 x 256
# and 8 x 512, and the headers exercise 4 of v6.md reads.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
git log --oneline -1 > $L/commit.txt; git status --short >> $L/commit.txt; git diff > $L/tree.diff
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 16 >/tmp/build.log 2>&1 || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"
(cd build && timeout 300 ctest -L "^gpu$" -j 10 --timeout 250 --output-on-failure > $L/gpu-suite.log 2>&1); echo "suite rc $? $(el) s"; grep -E "tests passed|\(Failed\)|\*\*\*Failed|Timeout" $L/gpu-suite.log | head -20
for T in memcheck racecheck; do
  timeout 150 compute-sanitizer --tool $T --error-exitcode 3 build/tiny_llama --device cuda --version v6 --use-amp --num-steps 2 --batch-size 2 --seq-len 128 > $L/san_$T.log 2>&1
  echo "$T rc $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $L/san_$T.log | tail -1) $(el) s"
done
timeout 200 python3 tools/pytorch_reference.py --modes compile+graph --precisions bf16 --json $L/pytorch.json > $L/pytorch.log 2>&1; echo "pytorch rc $? $(el) s"; tail -1 $L/pytorch.log
B="build/tiny_llama bench --device cuda --precisions bf16 --repeats 3 --levels v4,v5,v6"
timeout 100 $B --batch-sizes 8 --seq-lens 128 --pytorch $L/pytorch.json > $L/ladder_8x128.log 2>&1; grep -E "^v[456] |holds|BROKEN" $L/ladder_8x128.log
for T in 256 512; do timeout 150 $B --batch-sizes 8 --seq-lens $T > $L/ladder_8x$T.log 2>&1; grep -E "^v[456] |holds|BROKEN" $L/ladder_8x$T.log; done
timeout 60 build/tiny_llama --device cuda --version v5 --use-amp --num-steps 3 --seq-len 512 > $L/header_v5_8x512.log 2>&1
timeout 60 build/tiny_llama --device cuda --version v5 --use-amp --num-steps 3 --preset medium --disable fp8 > $L/header_v5_medium_bf16.log 2>&1
grep -h -o "weight gradients[^;]*" $L/header_v5_8x512.log $L/header_v5_medium_bf16.log
echo "== done $(el) s"
