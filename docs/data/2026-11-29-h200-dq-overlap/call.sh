#!/usr/bin/env bash
# One H200: the dQ kernel with three key/value buffers, its dS K running on into the next step
# (this tree) against HEAD (.dev/head.tgz): attention tests, kernels rows alternating, v5 steps.
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
(cd build && timeout 200 ctest -L "^gpu$" -R "GpuAttention|GpuOpCase|GpuKernelCheck" -j 4 --output-on-failure > $L/gpu-tests.log 2>&1)
grep -E "tests passed|tests failed" $L/gpu-tests.log; grep -E "\*\*\*Failed|Failure|Expected|Which is|Timeout" $L/gpu-tests.log | head -10
timeout 60 build/tiny_llama kernels --check --levels v3,v4,v5 --ops attention > $L/check.log 2>&1; echo "check rc $?"; grep -E "attention" $L/check.log | head -12
echo "== kernels $(el) s"
G="--precision bf16 --batch-size 16 --seq-len 1024 --hidden-dim 768 --num-heads 12 --num-kv-heads 12 --intermediate-size 2048 --vocab-size 50257 --seq-lens 1024 --long-batch 16"
for rep in 1 2; do for tree in head new; do bin=build/tiny_llama; [ $tree = head ] && bin=/tmp/head/build/tiny_llama
  timeout 90 $bin kernels --levels v3 $G --ops attention --repeats 30 > $L/kernels_gpt2_${tree}_$rep.log 2>&1 || echo "kernels rc $?"
  timeout 90 $bin kernels --levels v3 --precision bf16 --ops attention --repeats 30 > $L/kernels_default_${tree}_$rep.log 2>&1 || echo "kernels rc $?"
  echo "$tree $rep: $(grep -E 'attention' $L/kernels_gpt2_${tree}_$rep.log | grep -i 'v3' | cut -c1-120 | tr '\n' '|')"
done; done
echo "== steps $(el) s"
for rep in 1 2; do for p in gpt2-small medium; do for tree in head new; do bin=build/tiny_llama; [ $tree = head ] && bin=/tmp/head/build/tiny_llama
  n=${p}_${tree}_$rep
  timeout 60 $bin bench --device cuda --levels v5 --precisions bf16 --timing-warmup-steps 5 --steps 10 --repeats 3 --preset $p --json $L/$n.json > $L/$n.log 2>&1 || tail -3 $L/$n.log
  echo "$n: $(grep -E '^v5' $L/$n.log | awk '{print $5, $6}')"
done; done; done
echo "== sanitizer $(el) s"
split="--batch-size 1 --seq-len 1024 --hidden-dim 512 --num-layers 1"
for tool in memcheck racecheck; do
  timeout 200 compute-sanitizer --tool $tool --error-exitcode 3 build/tiny_llama --device cuda --version v3 --use-amp $split --num-steps 2 --log-every 1 > $L/sanitizer_$tool.log 2>&1
  echo "$tool rc $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $L/sanitizer_$tool.log | tail -1); outside nvjet: $(grep -E ' access at ' $L/sanitizer_$tool.log | grep -vc ' access at nvjet_')"
done
echo "== done $(el) s"
