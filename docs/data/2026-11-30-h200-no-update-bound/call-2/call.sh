#!/usr/bin/env bash
# One H200 at the tree (884e2e6 plus v6.md's exercise 19): exercise 19 as written.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
git log --oneline -1 > $L/commit.txt; git status --short >> $L/commit.txt
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 16 --target tiny_llama >/tmp/build.log 2>&1 || exit 1
echo "built $(el) s"
git apply docs/data/2026-11-30-h200-no-update-bound/skip-adamw.patch && echo applied || exit 1
cmake --build build --target tiny_llama > $L/rebuild.log 2>&1; echo "rebuilt rc $? $(el) s"
for r in 1 2; do
  TT_SKIP_ADAMW=1 timeout 60 build/tiny_llama bench --device cuda --levels v6 --precisions bf16 --batch-sizes 8 --seq-lens 128 --repeats 3 > $L/ex19-skip-$r.log 2>&1
  timeout 60 build/tiny_llama bench --device cuda --levels v6 --precisions bf16 --batch-sizes 8 --seq-lens 128 --repeats 3 > $L/ex19-update-$r.log 2>&1
  echo "round $r: skip $(grep -E '^v6 ' $L/ex19-skip-$r.log | awk '{print $5}') update $(grep -E '^v6 ' $L/ex19-update-$r.log | awk '{print $5}')"
done
timeout 60 build/tiny_llama --device cuda --version v6 --use-amp --seq-len 128 --num-steps 15 --timing-warmup-steps 10 --profile-steps 3 --profile prof > $L/ex19-prof-update.log 2>&1
python3 scripts/profile/chain.py prof/trace.json --beside weight_gradients > $L/ex19-chain-update.txt 2>&1
TT_SKIP_ADAMW=1 timeout 60 build/tiny_llama --device cuda --version v6 --use-amp --seq-len 128 --num-steps 15 --timing-warmup-steps 10 --profile-steps 3 --profile prof > $L/ex19-prof-skip.log 2>&1
python3 scripts/profile/chain.py prof/trace.json --beside weight_gradients > $L/ex19-chain-skip.txt 2>&1
for v in update skip; do echo "$v: $(grep -E '^(forward|backward):' $L/ex19-chain-$v.txt | tr '\n' '|')"; done
git apply -R docs/data/2026-11-30-h200-no-update-bound/skip-adamw.patch && echo undone
echo "== done $(el) s"
