#!/usr/bin/env bash
# Quantize kernel load order: 0 as is, 1 scale read beside the first loads, 2 also the second half's loads before the first's stores.
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
N=$(nproc); T0=$(date +%s)
L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$N" --target tiny_llama gpu_tests >/tmp/build.log 2>&1) || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
echo "built $(( $(date +%s) - T0 )) s"
G="--precision bf16 --batch-size 16 --seq-len 1024 --hidden-dim 768 --num-heads 12 --num-kv-heads 12 --intermediate-size 2048 --vocab-size 50257 --seq-lens 1024 --long-batch 16"
for o in 0 1 2; do
  export TT_QUANTIZE_ORDER=$o
  timeout 100 build/tests/gpu_tests --gtest_filter='Formats/Fp8Quantize.*:Fp8Model.*' > $L/tests_$o.log 2>&1; echo "order $o tests rc $? $(tail -1 $L/tests_$o.log)"
  timeout 90 build/tiny_llama kernels --levels v5 $G --ops swiglu,quantize,rope,cross_entropy > $L/kernels_$o.log 2>&1; echo "kernels rc $?"
  grep -E "^(swiglu|quantize|rope|cross_entropy) " $L/kernels_$o.log | sort -u | awk '{print $1,$2,$5,$6,$7,$8}'
done
for rep in 1 2; do for o in 0 2 1; do
  TT_QUANTIZE_ORDER=$o timeout 60 build/tiny_llama --device cuda --version v5 --use-amp --preset gpt2-small --num-steps 50 --timing-warmup-steps 10 --log-every 100 > $L/step_${o}_$rep.log 2>&1
  echo "order $o rep $rep: $(grep -E 'Average batch time' $L/step_${o}_$rep.log)"
done; done
echo "== done $(( $(date +%s) - T0 )) s"
