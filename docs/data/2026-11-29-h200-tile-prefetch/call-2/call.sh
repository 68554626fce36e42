#!/usr/bin/env bash
# One H200: the tile pass's L2 prefetch (StoredMatrix, SwiGluOutput, SoftmaxGradient) and RoPE's
# 32-bit gradient source (this tree, uncommitted) against b93d566 (.dev/head.tgz): the FP8 and
# RoPE tests, kernels --check rows, kernels rows of both trees, v5 steps alternating, a profile of each.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
mkdir -p /tmp/head && tar xzf .dev/head.tgz -C /tmp/head
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 10 --target tiny_llama gpu_tests >/tmp/build.log 2>&1) & B1=$!
(cd /tmp/head && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg2.log 2>&1 && cmake --build build -j 6 --target tiny_llama >/tmp/build2.log 2>&1) & B2=$!
wait $B1 || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
wait $B2 || { tail -30 /tmp/build2.log; exit 1; }
echo "built $(el) s"
(cd build && timeout 120 ctest -L "^gpu$" -R "Fp8|Rope|CrossEntropy|SwiGlu" -j 6 --output-on-failure > $L/gpu-tests.log 2>&1)
grep -E "tests passed|tests failed" $L/gpu-tests.log; grep -E "\*\*\*Failed|Failure|Expected|Which is|Timeout" $L/gpu-tests.log | head -10
timeout 90 build/tiny_llama kernels --levels v5 --check --ops swiglu,quantize,rope,cross_entropy > $L/kernels_check.log 2>&1; echo "check rc $?"; grep -ciE "fail|MISSED" $L/kernels_check.log
echo "== kernels $(el) s"
G="--precision bf16 --batch-size 16 --seq-len 1024 --hidden-dim 768 --num-heads 12 --num-kv-heads 12 --intermediate-size 2048 --vocab-size 50257 --seq-lens 1024 --long-batch 16"
for tree in head new head2 new2; do bin=build/tiny_llama; [ ${tree%2} = head ] && bin=/tmp/head/build/tiny_llama
  timeout 60 $bin kernels --levels v5 $G --ops swiglu,quantize,rope,cross_entropy --repeats 9 > $L/kernels_$tree.log 2>&1 || echo "kernels $tree rc $?"
  echo "$tree: $(grep -E '^(swiglu|quantize|rope|cross_entropy) ' $L/kernels_$tree.log | sort -u | awk '{printf "%s/%s %s  ", $1, $2, $5}')"
done
echo "== steps $(el) s"
for rep in 1 2; do for p in gpt2-small medium; do for tree in head new; do
  bin=build/tiny_llama; [ $tree = head ] && bin=/tmp/head/build/tiny_llama
  n=${p}_${tree}_$rep
  timeout 60 $bin bench --device cuda --levels v5 --precisions bf16 --timing-warmup-steps 5 --steps 10 --repeats 3 --preset $p --json $L/$n.json > $L/$n.log 2>&1 || tail -3 $L/$n.log
  echo "$n: $(grep -E '^v5' $L/$n.log | awk '{print $5, $6}')"
done; done; done
echo "== profiles $(el) s"
for tree in head new; do bin=build/tiny_llama; [ $tree = head ] && bin=/tmp/head/build/tiny_llama
  timeout 60 $bin --device cuda --use-amp --version v5 --preset gpt2-small --num-steps 9 --timing-warmup-steps 6 --profile-steps 2 --log-every 100 --profile $L/profile_$tree > $L/profile_$tree.log 2>&1 || tail -3 $L/profile_$tree.log
  rm -f $L/profile_$tree/trace.json
  echo "$tree: $(grep -E 'Average batch time' $L/profile_$tree.log)"
done
echo "== done $(el) s"
