#!/usr/bin/env bash
# One H200: the block kernel's norms as tasks of 8 rows (.dev/norm-8.patch) against 16, and v6
# without the block kernel, alternating three rounds; the losses of 20 steps with 8.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
git log --oneline -1 > $L/commit.txt; git status --short >> $L/commit.txt
build() { cmake --build build -j 16 --target tiny_llama >/tmp/build.log 2>&1 || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }; }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1; build; cp build/tiny_llama /tmp/tl16
git apply .dev/norm-8.patch || exit 1; build; cp build/tiny_llama /tmp/tl8; echo "built $(el) s"
S="--device cuda --version v6 --use-amp --seq-len 128 --num-steps 20 --log-every 1"
timeout 60 /tmp/tl16 $S > $L/bits_off.log 2>&1; timeout 60 /tmp/tl8 $S --enable blocks-forward-in-one-launch > $L/bits_8.log 2>&1
cmp <(grep -o "Loss: [0-9.]*" $L/bits_off.log) <(grep -o "Loss: [0-9.]*" $L/bits_8.log) && echo "8-row norms: the same losses ($(grep -c 'Loss:' $L/bits_off.log))"
B="bench --device cuda --levels v6 --precisions bf16 --batch-sizes 8 --seq-lens 128 --repeats 3"
for R in 1 2 3; do
  timeout 60 /tmp/tl16 $B > $L/bench_off_$R.log 2>&1; timeout 60 /tmp/tl16 $B --enable blocks-forward-in-one-launch > $L/bench_16_$R.log 2>&1
  timeout 60 /tmp/tl8 $B --enable blocks-forward-in-one-launch > $L/bench_8_$R.log 2>&1
  echo "round $R off $(grep -E '^v6 ' $L/bench_off_$R.log | awk '{print $5}') rows16 $(grep -E '^v6 ' $L/bench_16_$R.log | awk '{print $5}') rows8 $(grep -E '^v6 ' $L/bench_8_$R.log | awk '{print $5}') $(el) s"
done
echo "== done $(el) s"
