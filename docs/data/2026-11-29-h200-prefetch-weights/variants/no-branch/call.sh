#!/usr/bin/env bash
# Two H200s: why HEAD with prefetch-weights off is slower than its parent tree 4351295 (g35: 1.085
# against 1.077-1.079): variant C keeps the 24-byte Successor but never reads l2 (no branch before
# the wait). Alternating parent / HEAD off / C, three rounds, and a profile of each; then the
# failing GpuProfile.ThreeStepTrace.../3 with its output, alone, three times.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
mkdir -p /tmp/parent /tmp/c && git archive 4351295 | tar x -C /tmp/parent && git archive HEAD | tar x -C /tmp/c || exit 1
sed -i 's/^  if (next.l2) prefetch_share_into_l2(next);$//' /tmp/c/src/ops/cuda_common.cuh
grep -c "prefetch_share_into_l2(next)" /tmp/c/src/ops/cuda_common.cuh
(cmake -S /tmp/parent -B /tmp/parent/build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg0.log 2>&1 && cmake --build /tmp/parent/build -j 12 --target tiny_llama >/tmp/build0.log 2>&1) &
P=$!
(cmake -S /tmp/c -B /tmp/c/build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfgc.log 2>&1 && cmake --build /tmp/c/build -j 12 --target tiny_llama >/tmp/buildc.log 2>&1) &
C=$!
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 12 --target tiny_llama gpu_tests >/tmp/build.log 2>&1) || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
wait $P || { tail -20 /tmp/build0.log; exit 1; }
wait $C || { tail -20 /tmp/buildc.log; exit 1; }
echo "built $(el) s"
B="bench --device cuda --levels v6 --precisions bf16 --batch-sizes 8 --seq-lens 128 --repeats 3"
for rep in 1 2 3; do
  timeout 40 /tmp/parent/build/tiny_llama $B > $L/parent_$rep.log 2>&1
  timeout 40 build/tiny_llama $B --disable-prefetch-weights > $L/off_$rep.log 2>&1
  timeout 40 /tmp/c/build/tiny_llama $B --disable-prefetch-weights > $L/c_$rep.log 2>&1
  echo "round $rep: parent $(grep -E '^v6 ' $L/parent_$rep.log | awk '{print $5}') off $(grep -E '^v6 ' $L/off_$rep.log | awk '{print $5}') c $(grep -E '^v6 ' $L/c_$rep.log | awk '{print $5}')"
done
P="--device cuda --version v6 --use-amp --seq-len 128 --num-steps 15 --timing-warmup-steps 10 --profile-steps 3"
timeout 30 /tmp/parent/build/tiny_llama $P --profile $L/profile_parent > $L/profile_parent.log 2>&1
timeout 30 build/tiny_llama $P --profile $L/profile_off --disable-prefetch-weights > $L/profile_off.log 2>&1
timeout 30 /tmp/c/build/tiny_llama $P --profile $L/profile_c --disable-prefetch-weights > $L/profile_c.log 2>&1
for S in parent off c; do echo "$S: $(grep -m1 -E 'busy' $L/profile_$S.log)"; rm -f $L/profile_$S/trace.json; done
echo "benches $(el) s"
timeout 120 build/tests/gpu_tests --gtest_filter='Versions/GpuProfile.*/3' --gtest_repeat=3 > $L/profile-test.log 2>&1
echo "profile test alone rc $? $(el) s"; grep -E "^\[ +(OK|FAILED|PASSED) |Failure|Expected|Which is|actual|step" $L/profile-test.log | head -40
echo "== done $(el) s"
