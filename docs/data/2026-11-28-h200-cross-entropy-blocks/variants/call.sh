#!/usr/bin/env bash
# The cross-entropy's loss pass (fp8-head's first pass): block shape and loads in flight, by TT_CE_VARIANT.
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
N=$(nproc); T0=$(date +%s)
L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$N" --target tiny_llama gpu_tests >/tmp/build.log 2>&1) || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
echo "built $(( $(date +%s) - T0 )) s"
G="--precision bf16 --batch-size 16 --seq-len 1024 --hidden-dim 768 --num-heads 12 --num-kv-heads 12 --intermediate-size 2048 --vocab-size 50257 --seq-lens 1024 --long-batch 16"
for rep in 1 2; do for v in 0 1 2 3; do
  TT_CE_VARIANT=$v timeout 60 build/tiny_llama kernels --levels v5 $G --ops cross_entropy > $L/kernels_${v}_$rep.log 2>&1
  echo "variant $v rep $rep: $(grep -E '^cross_entropy ' $L/kernels_${v}_$rep.log | sort -u | awk '{print $5,$6,$7}' | tr '\n' ' ')"
done; done
for v in 0 1 2 3; do TT_CE_VARIANT=$v timeout 100 build/tests/gpu_tests --gtest_filter='*CrossEntropy*:*Fp8Model.Gpt2*:GpuKernelCheck*' > $L/tests_$v.log 2>&1; echo "tests $v rc $? $(tail -1 $L/tests_$v.log)"; done
echo "== done $(( $(date +%s) - T0 )) s"
