#!/usr/bin/env bash
# One H200 at 01a4c59: how much RMSNorm's backward could give the v6 step at 8 x 128 if its gains'
# gradient left the chain. A: the tree (column blocks at 1024 rows). B: .dev/norm-two-stage.sh (two
# stages at every row count, early loads on), the second stage on the main stream; B-skip: the same
# binary with TT_SKIP_DW_SUM=1, the second stage not run (timing only). Three rounds, in turns.
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
bash .dev/norm-two-stage.sh || { echo "patch failed"; exit 1; }
git diff > $L/two-stage.patch
B && cp build/tiny_llama /tmp/tl-B
echo "built B $(el) s"
BENCH="bench --device cuda --levels v6 --precisions bf16 --batch-sizes 8 --seq-lens 128 --repeats 3"
for r in 1 2 3; do
  timeout 60 /tmp/tl-A $BENCH > $L/A_$r.log 2>&1
  timeout 60 /tmp/tl-B $BENCH > $L/B_$r.log 2>&1
  TT_SKIP_DW_SUM=1 timeout 60 /tmp/tl-B $BENCH > $L/Bskip_$r.log 2>&1
  echo "round $r $(el) s: $(for v in A B Bskip; do echo -n "$v $(grep -E '^v6 ' $L/${v}_$r.log | awk '{print $5, $6}') | "; done)"
done
for v in A B; do
  timeout 90 /tmp/tl-$v --device cuda --version v6 --use-amp --batch-size 8 --seq-len 128 --num-steps 20 --seed 7 --json $L/train-$v.json > $L/train-$v.log 2>&1; echo "train $v rc $?"
done
python3 -c "import json,sys; a,b=(json.load(open(f'$L/train-{v}.json'))['steps'] for v in 'AB'); print('losses', [x['loss'] for x in a][-3:], [x['loss'] for x in b][-3:], 'equal' if [x['loss'] for x in a]==[x['loss'] for x in b] else 'differ')"
TT_SKIP_DW_SUM=1 timeout 60 /tmp/tl-B --device cuda --version v6 --use-amp --batch-size 8 --seq-len 128 --num-steps 15 --timing-warmup-steps 10 --profile-steps 3 --profile $L/prof-Bskip > $L/prof-Bskip.log 2>&1; echo "profile Bskip rc $?"
timeout 60 /tmp/tl-A --device cuda --version v6 --use-amp --batch-size 8 --seq-len 128 --num-steps 15 --timing-warmup-steps 10 --profile-steps 3 --profile $L/prof-A > $L/prof-A.log 2>&1; echo "profile A rc $? $(el) s"
for v in A Bskip; do echo "$v: $(grep -E '= .* busy' $L/prof-$v.log | head -1)"; grep -E "rmsnorm|rms_dw" $L/prof-$v/kernels.csv | cut -c1-200; rm -f $L/prof-$v/trace.json; done
echo "== done $(el) s"
