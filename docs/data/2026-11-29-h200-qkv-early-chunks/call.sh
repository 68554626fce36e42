#!/usr/bin/env bash
# Two H200s. GPU 1 (in the background): v6 then v5 at the shapes where v6 runs v5's kernels (the
# order reversed from 2026-11-29's elsewhere call). GPU 0: the new tests (empty products refused,
# kernels --programmatic), kernels plain against programmatic, the QKV kernel's early weight
# chunks 6 / 2 / 0 alternating, and a profile of each.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 32 >/tmp/build.log 2>&1) || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(el) s"
cp build/tiny_llama /tmp/tl-e6
(
  export CUDA_VISIBLE_DEVICES=1
  for P in gpt2-small medium; do
    timeout 150 /tmp/tl-e6 bench --device cuda --levels v6,v5 --precisions bf16 --preset $P --repeats 3 --json $L/rev_$P.json > $L/rev_$P.log 2>&1
    echo "$P: $(grep -E '^v[56] ' $L/rev_$P.log | awk '{print $1, $5}' | tr '\n' ' ') | $(grep -E 'batch.*seq' $L/rev_$P.log | tail -1)"
  done
  for BT in "1 4096" "8 256" "8 512"; do set -- $BT
    timeout 120 /tmp/tl-e6 bench --device cuda --levels v6,v5 --precisions bf16 --batch-sizes $1 --seq-lens $2 --repeats 3 --json $L/rev_$1x$2.json > $L/rev_$1x$2.log 2>&1
    echo "$1x$2: $(grep -E '^v[56] ' $L/rev_$1x$2.log | awk '{print $1, $5}' | tr '\n' ' ') | $(grep -E 'batch.*seq' $L/rev_$1x$2.log | tail -1)"
  done
) > $L/reversed.txt 2>&1 &
REV=$!
export CUDA_VISIBLE_DEVICES=0
timeout 200 build/tests/gpu_tests --gtest_filter='GpuGatedProduct*:GpuRopeProduct*:GpuWeightGradients*:GpuCli.KernelBench*:*ExtraChecks/qkv_rope*:*ExtraChecks/gated_product*' > $L/tests.log 2>&1
echo "tests rc $? $(el) s"; grep -E "^\[ +(OK|FAILED|PASSED) |Failure" $L/tests.log | head -30
for mode in plain programmatic; do
  flag=""; [ $mode = programmatic ] && flag=--programmatic
  timeout 120 build/tiny_llama kernels --levels v5,v6 --ops qkv_rope,gated_product --seq-lens 1024 --repeats 20 $flag --json $L/kernels_$mode.json > $L/kernels_$mode.log 2>&1
  echo "kernels $mode rc $?"; grep -E "qkv_rope|gated_product" $L/kernels_$mode.log | head -12
done
echo "kernels $(el) s"
for E in 2 0; do
  sed -i "s/kEarlyChunks = [0-9]/kEarlyChunks = $E/" src/ops/rope_product.cu
  cmake --build build -j 32 --target tiny_llama >/tmp/build-$E.log 2>&1 || { tail -20 /tmp/build-$E.log; exit 1; }
  cp build/tiny_llama /tmp/tl-e$E
done
sed -i "s/kEarlyChunks = [0-9]/kEarlyChunks = 6/" src/ops/rope_product.cu
echo "variants $(el) s"
for rep in 1 2 3; do
  line="round $rep:"
  for E in 6 2 0; do
    timeout 60 /tmp/tl-e$E bench --device cuda --levels v6 --precisions bf16 --batch-sizes 8 --seq-lens 128 --repeats 3 --json $L/early${E}_$rep.json > $L/early${E}_$rep.log 2>&1
    line="$line e$E $(grep -E '^v6 ' $L/early${E}_$rep.log | awk '{print $5}')"
  done
  echo "$line"
done
for E in 6 2 0; do
  timeout 60 /tmp/tl-e$E kernels --programmatic --levels v5,v6 --ops qkv_rope --seq-lens 1024 --repeats 20 > $L/kernels_early$E.log 2>&1
  echo "e$E kernels: $(grep -E 'qkv_rope' $L/kernels_early$E.log | grep B8 | tr -s ' ' | cut -c1-120 | tr '\n' '|')"
  timeout 60 /tmp/tl-e$E --device cuda --version v6 --use-amp --batch-size 8 --seq-len 128 --num-steps 15 --timing-warmup-steps 10 --profile-steps 3 --profile $L/profile_e$E > $L/profile_e$E.log 2>&1
  echo "e$E: $(grep -E '= .* busy' $L/profile_e$E.log | head -1) | $(grep qkv_gemm_rope $L/profile_e$E/kernels.csv)"
  rm -f $L/profile_e$E/trace.json
done
echo "early $(el) s"
wait $REV; cat $L/reversed.txt
echo "== done $(el) s"
