#!/usr/bin/env bash
# Device call 3: build, the new FP8 tests, the 2000-step run on fortunes + Brown (v4 against v5 with
# the head and RoPE's backward in FP8), PyTorch's strongest at gpt2-small beside v4 and v5.
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
N=$(nproc)
T0=$(date +%s)
L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
echo "== build $(date +%T)"
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$N" --target tiny_llama gpu_tests >/tmp/build.log 2>&1) || { tail -30 /tmp/cfg.log /tmp/build.log; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== tests $(date +%T)"
timeout 240 build/tests/gpu_tests --gtest_filter='Fp8Quantize.*:Fp8Model.Fused*:Fp8Model.AResumed*:*GpuOpCase*rope_v5*:*GpuOpCase*cross_entropy_v5*:GpuKernelCheck*' > $L/tests.log 2>&1; echo "rc $?"
grep -E "^\[ +(OK|FAILED) |PASSED|Failure|Expected|Which is|actual|rror" $L/tests.log | head -40
echo "== long runs $(date +%T)"
set -f
recipe="--data data/corpus/tokens/*.bin --vocab-size 8000 --seq-len 256 --batch-size 8 --grad-accum-steps 2 \
  --lr-schedule cosine --learning-rate 1e-3 --min-lr 1e-4 --lr-warmup-steps 100 --weight-decay 0.1 \
  --grad-clip 1 --no-decay-norms --shuffle --val-tokens 65536 --use-amp --log-every 500 --eval-every 100"
for run in "v4_42:--version v4 --seed 42" "v5_42:--version v5 --enable-fp8-every-shape --seed 42" "v5_43:--version v5 --enable-fp8-every-shape --seed 43" "v4_43:--version v4 --seed 43"; do
  IFS=: read -r name flags <<<"$run"
  timeout 120 build/tiny_llama --device cuda $flags $recipe --num-steps 2000 --json $L/long_$name.json > $L/long_$name.log 2>&1; echo "$name rc $?"
  grep -E "Products|Step .*2000/|val" $L/long_$name.log | tail -3
done
set +f
echo "== pytorch + ours, gpt2-small $(date +%T)"
timeout 100 build/tiny_llama bench --device cuda --levels v4,v5 --precisions bf16 --timing-warmup-steps 5 --steps 10 --repeats 3 --preset gpt2-small --json $L/bench_gpt2.json > $L/bench_gpt2.log 2>&1; grep -E "^v[0-9]" $L/bench_gpt2.log
left=$(( 585 - ($(date +%s) - T0) ))
PYTHONUNBUFFERED=1 timeout $left python3 tools/pytorch_reference.py --preset gpt2-small --vocab-size 50257 --vocab-multiple 128 \
  --modes compile+graph --precisions bf16 --steps 10 --repeats 3 --json $L/pytorch_gpt2.json > $L/pytorch_gpt2.log 2>&1; echo "rc $?"
grep -E "^pytorch|Error" $L/pytorch_gpt2.log
echo "== done $(date +%T)"
