#!/usr/bin/env bash
# Call 5 (one GPU): the tests that take the flash attention kernels and the cross-entropy (ctest,
# label gpu), then compute-sanitizer memcheck and racecheck on 2-step v3/v5 bf16 runs.
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
N=$(nproc); T0=$(date +%s)
L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$N" --target tiny_llama gpu_tests >/tmp/build.log 2>&1) || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
echo "built $(( $(date +%s) - T0 )) s"
(cd build && timeout 330 ctest -L "^gpu$" -R "attention|Attention|cross_entropy|CrossEntropy|GpuModel|Fp8Model|RealSizes|FusedClassifier|GpuKernelCheck|GpuLaunch" -j 6 --timeout 250 > $L/ctest.log 2>&1); echo "ctest rc $?"
grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)|Skipped" $L/ctest.log | head -20
echo "tests done $(( $(date +%s) - T0 )) s"
small="--batch-size 2 --seq-len 64 --hidden-dim 128 --num-heads 2 --num-layers 2"
split="--batch-size 1 --seq-len 1024 --hidden-dim 512 --num-layers 1"
for tool in memcheck racecheck; do
  for r in "v3_split:--version v3 --use-amp $split" "v5_small:--version v5 --use-amp --enable-fp8-every-shape $small" "v4_rope:--version v4 --use-amp --enable-rope-in-attention $small"; do
    n=${r%%:*}
    timeout 120 compute-sanitizer --tool $tool --error-exitcode 3 build/tiny_llama --device cuda ${r#*:} --num-steps 2 --log-every 1 > $L/san_${tool}_$n.log 2>&1
    echo "$tool $n rc $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $L/san_${tool}_$n.log) step2 $(grep -c 'Step   2/2' $L/san_${tool}_$n.log) outside-nvjet $(grep -E ' access at ' $L/san_${tool}_$n.log | grep -vc ' access at nvjet_')"
  done
done
echo "== done $(( $(date +%s) - T0 )) s"
