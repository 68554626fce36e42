#!/usr/bin/env bash
# One H200 at 199f764: the v6 step at 8 x 128 with no update at all (timing only: .dev/skip-adamw.sh,
# TT_SKIP_ADAMW=1 makes every AdamW launch return), against the tree, three rounds in turns; the
# patched binary without the variable once (the same as the tree); a profile of each.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
git log --oneline -1 > $L/commit.txt; git status --short >> $L/commit.txt
B() { cmake --build build -j 16 --target tiny_llama >/tmp/build.log 2>&1 || { grep -B2 -A12 "error" /tmp/build.log | head -60; exit 1; }; }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && B && cp build/tiny_llama /tmp/tl-A
echo "built A $(el) s"
bash .dev/skip-adamw.sh || { echo "patch failed"; exit 1; }
git diff -- src > $L/skip-adamw.patch
B && cp build/tiny_llama /tmp/tl-S
echo "built S $(el) s"
BENCH="bench --device cuda --levels v6 --precisions bf16 --batch-sizes 8 --seq-lens 128 --repeats 3"
for r in 1 2 3; do
  timeout 60 /tmp/tl-A $BENCH > $L/A_$r.log 2>&1
  TT_SKIP_ADAMW=1 timeout 60 /tmp/tl-S $BENCH > $L/skip_$r.log 2>&1
  echo "round $r $(el) s: $(for v in A skip; do echo -n "$v $(grep -E '^v6 ' $L/${v}_$r.log | awk '{print $5, $6, "fwd", $9, "bwd", $10, "opt", $11}') | "; done)"
done
timeout 60 /tmp/tl-S $BENCH > $L/S-unset.log 2>&1; echo "patched, unset: $(grep -E '^v6 ' $L/S-unset.log | awk '{print $5, $6}')"
P="--device cuda --version v6 --use-amp --batch-size 8 --seq-len 128 --num-steps 15 --timing-warmup-steps 10 --profile-steps 3"
timeout 60 /tmp/tl-A $P --profile $L/prof-A > $L/prof-A.log 2>&1; echo "profile A rc $?"
TT_SKIP_ADAMW=1 timeout 60 /tmp/tl-S $P --profile $L/prof-skip > $L/prof-skip.log 2>&1; echo "profile skip rc $?"
for v in A skip; do echo "$v: $(grep -E '= .* busy' $L/prof-$v.log | head -3 | tr '\n' '|')"; python3 scripts/profile/chain.py $L/prof-$v/trace.json --beside weight_gradients > $L/chain-$v.txt 2>&1; head -30 $L/chain-$v.txt; gzip $L/prof-$v/trace.json; done
echo "== done $(el) s"
