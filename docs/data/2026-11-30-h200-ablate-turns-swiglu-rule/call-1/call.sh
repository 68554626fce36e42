#!/usr/bin/env bash
# One H200 at e269ba6: v6's switches, each off in turn, at the default shape (tiny_llama ablate; the
# first since the weight gradients' lane), and compute-sanitizer memcheck over two v4 fp32 steps
# (its products with cuBLAS's workspace again).
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
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 build/tiny_llama --device cuda --version v4 --num-steps 2 --batch-size 2 --seq-len 128 > $L/memcheck_v4_fp32.log 2>&1; echo "memcheck rc $? $(el) s"; grep -E "ERROR SUMMARY|Products" $L/memcheck_v4_fp32.log
timeout 280 build/tiny_llama ablate --device cuda --version v6 --use-amp --num-steps 100 --csv $L/ablate_v6.csv > $L/ablate_v6.log 2>&1; echo "ablate rc $? $(el) s"
sed -n '/^Ablation of/,$p' $L/ablate_v6.log
echo "== done $(el) s"
