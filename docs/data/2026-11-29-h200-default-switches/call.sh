#!/usr/bin/env bash
# One H200, HEAD (787cf35): the ticket of the fused attention backward under the attention tests
# and memcheck; then the default shape (8 x 128) with the opt-in switches that remove launches,
# alternating; and a v4 profile at the default shape.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$(nproc)" --target tiny_llama gpu_tests >/tmp/build.log 2>&1) || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader; echo "built $(el) s"
timeout 150 build/tests/gpu_tests --gtest_filter='*GpuAttention*:*GpuOpCase*attention*' > $L/tests.log 2>&1; echo "tests rc $?"
grep -E "^\[ +(OK|FAILED) .*Fused|PASSED|FAILED|Failure|Expected|Which is" $L/tests.log | head -30
small="--batch-size 2 --seq-len 256 --hidden-dim 128 --num-heads 2 --num-layers 1 --num-steps 2 --enable-fused-attention-backward"
timeout 120 compute-sanitizer --tool memcheck build/tiny_llama --device cuda --version v5 --use-amp $small > $L/memcheck.log 2>&1; echo "memcheck rc $?: $(grep -E 'ERROR SUMMARY' $L/memcheck.log | tail -1)"
echo "== default shape $(el) s"
for rep in 1 2; do
  for v in base rope rope_grouped grouped; do
    case $v in base) f="";; rope) f="--enable-rope-in-attention";; rope_grouped) f="--enable-rope-in-attention --enable-grouped-weight-gradients";; grouped) f="--enable-grouped-weight-gradients";; esac
    timeout 60 build/tiny_llama bench --device cuda --levels v5 --precisions bf16 --repeats 3 $f --json $L/default_${v}_$rep.json > $L/default_${v}_$rep.log 2>&1
    echo "$v $rep: $(grep -E '^v5 ' $L/default_${v}_$rep.log)"
  done
done
echo "== profile $(el) s"
timeout 90 build/tiny_llama --device cuda --version v4 --use-amp --seq-len 128 --num-steps 15 --timing-warmup-steps 10 --profile-steps 3 --profile $L/profile_v4 > $L/profile_v4.log 2>&1; echo "profile rc $?"
grep -E "Kernel launches|^  [0-9.]+ = |under one wave" $L/profile_v4.log | head -6
timeout 90 build/tiny_llama --device cuda --version v5 --use-amp --seq-len 128 --num-steps 15 --timing-warmup-steps 10 --profile-steps 3 --profile $L/profile_rope --enable-rope-in-attention > $L/profile_rope.log 2>&1; echo "profile rope rc $?"
grep -E "Kernel launches|^  [0-9.]+ = |flash" $L/profile_rope.log | head -8
echo "== done $(el) s"
