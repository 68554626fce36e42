#!/usr/bin/env bash
# One H200: compute-sanitizer (memcheck, racecheck, synccheck) over two v6 steps at HEAD, then
# AdamW's block size 128 / 256 / 512 / 1024 (sed), v6 steps alternating, two rounds.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 32 --target tiny_llama >/tmp/build.log 2>&1) || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
cp build/tiny_llama /tmp/tl-256
echo "built $(el) s"
S="/usr/local/cuda/bin/compute-sanitizer"
A="--device cuda --version v6 --use-amp --batch-size 2 --seq-len 128 --num-steps 2"
timeout 120 $S --tool memcheck --error-exitcode 9 /tmp/tl-256 $A > $L/san_memcheck.log 2>&1; echo "memcheck rc $? $(tail -1 $L/san_memcheck.log)"
timeout 150 $S --tool racecheck /tmp/tl-256 $A > $L/san_racecheck.log 2>&1; echo "racecheck rc $? $(grep -E 'RACECHECK SUMMARY' $L/san_racecheck.log)"; grep -E "Race reported" $L/san_racecheck.log | sed 's/0x[0-9a-f]*//g' | sort | uniq -c | head -4
grep -E "in (void )?[a-z_]+.*kernel|nvjet" $L/san_racecheck.log | sed 's/(.*//' | sort | uniq -c | head -6
timeout 120 $S --tool synccheck --error-exitcode 9 /tmp/tl-256 $A > $L/san_synccheck.log 2>&1; echo "synccheck rc $? $(tail -1 $L/san_synccheck.log)"
echo "sanitizers $(el) s"
for T in 128 512 1024; do
  sed -i "s/^constexpr int kThreads = [0-9]*;/constexpr int kThreads = $T;/" src/ops/adamw.cu
  cmake --build build -j 32 --target tiny_llama >/tmp/build-$T.log 2>&1 || { tail -20 /tmp/build-$T.log; exit 1; }
  cp build/tiny_llama /tmp/tl-$T
done
git checkout src/ops/adamw.cu
echo "variants $(el) s"
for rep in 1 2; do
  line="round $rep:"
  for T in 256 128 512 1024; do
    timeout 60 /tmp/tl-$T bench --device cuda --levels v6 --precisions bf16 --batch-sizes 8 --seq-lens 128 --repeats 3 > $L/adamw${T}_$rep.log 2>&1
    line="$line t$T $(grep -E '^v6 ' $L/adamw${T}_$rep.log | awk '{print $5, $NF}')"
  done
  echo "$line"
done
echo "== done $(el) s"
