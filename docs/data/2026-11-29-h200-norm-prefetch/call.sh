#!/usr/bin/env bash
# One H200, this tree with an experiment switch (env TT_NPF): RMSNorm's FP8 forward and fused
# backward asking L2 for each warp's next row. Norm tests with it on; kernels rows and v5 steps
# with and without, alternating.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$(nproc)" --target tiny_llama gpu_tests >/tmp/build.log 2>&1) || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
echo "built $(el) s"
(cd build && TT_NPF=1 timeout 120 ctest -L "^gpu$" -R "Fp8Quantize|Fp8Model.Fused|RmsNorm|RMSNorm|Rmsnorm|ResidualNorm|KernelCheck" -j 6 --output-on-failure > $L/gpu-tests.log 2>&1)
grep -E "tests passed|tests failed" $L/gpu-tests.log; grep -E "\*\*\*Failed|Failure|Expected|Which is|Timeout" $L/gpu-tests.log | head -10
G="--precision bf16 --batch-size 16 --seq-len 1024 --hidden-dim 768 --num-heads 12 --num-kv-heads 12 --intermediate-size 2048 --vocab-size 50257 --seq-lens 1024 --long-batch 16"
for v in base npf base2 npf2; do env=(); [ ${v%2} = npf ] && env=(TT_NPF=1)
  env "${env[@]}" timeout 60 build/tiny_llama kernels --levels v3,v4,v5 $G --ops rmsnorm,residual_norm --repeats 9 > $L/kernels_$v.log 2>&1 || echo "kernels $v rc $?"
  echo "$v: $(grep -E '^(rmsnorm|residual_norm) ' $L/kernels_$v.log | sort -u | awk '{printf "%s/%s/%s %s  ", $1, $2, $4, $5}')"
done
echo "== steps $(el) s"
for rep in 1 2; do for p in gpt2-small medium; do for v in base npf; do env=(); [ $v = npf ] && env=(TT_NPF=1)
  n=${p}_${v}_$rep
  env "${env[@]}" timeout 60 build/tiny_llama bench --device cuda --levels v5 --precisions bf16 --timing-warmup-steps 5 --steps 10 --repeats 3 --preset $p --json $L/$n.json > $L/$n.log 2>&1 || tail -3 $L/$n.log
  echo "$n: $(grep -E '^v5' $L/$n.log | awk '{print $5, $6}')"
done; done; done
echo "== done $(el) s"
