#!/usr/bin/env bash
# One H200 at 0025553 (clean): v5 and v6 in turns where v6's kernel rules refuse, or the lane's
# tiles change: gpt2-small, medium, and the default model at 1 x 4096, 8 x 256, 8 x 512, 2 x 1024.
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
B="build/tiny_llama bench --device cuda --levels v5,v6 --precisions bf16 --repeats 3"
for P in gpt2-small medium; do
  timeout 150 $B --preset $P > $L/$P.log 2>&1; echo "$P rc $? $(el) s"; grep -E "holds|BROKEN|even" $L/$P.log
done
for S in "1 4096" "8 256" "8 512" "2 1024"; do set -- $S
  timeout 60 $B --batch-sizes $1 --seq-lens $2 > $L/default_$1x$2.log 2>&1; echo "$1x$2 rc $? $(el) s"; grep -E "holds|BROKEN|even" $L/default_$1x$2.log
done
echo "== done $(el) s"
