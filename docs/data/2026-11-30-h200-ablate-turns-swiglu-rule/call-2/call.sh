#!/usr/bin/env bash
# One H200: tiny_llama ablate with the configurations taking turns (three runs each, the median),
# v6 at the default shape; the tree is e269ba6 with ablate's turns.
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
timeout 200 build/tiny_llama ablate --device cuda --version v6 --use-amp --num-steps 100 --csv $L/ablate_v6.csv > $L/ablate_v6.log 2>&1; echo "ablate rc $? $(el) s"
sed -n '/^Ablation of/,$p' $L/ablate_v6.log
echo "== done $(el) s"
