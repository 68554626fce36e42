#!/usr/bin/env bash
# One H200 at 015c168: RMSNorm's backward reading the residual gradient (and rstd) with its first
# loads, not after the row's sum: A with the kernel's bounds as they are (3 blocks an SM, a few
# bytes spilled), B with 2 blocks an SM where it adds into the residual gradient (110 registers).
# Three binaries, the v6 step alternating; a profile of each.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
git log --oneline -1 > $L/commit.txt; git status --short >> $L/commit.txt
cp .dev/rms-preload.patch .dev/rms-preload-2.patch $L/
build() {  # dir, patch or ""
  local d=$1 p=$2
  if [ -n "$p" ]; then rm -rf $d; mkdir -p $d; git ls-files -z | xargs -0 cp --parents -t $d; (cd $d && git init -q && git apply --unsafe-paths $OLDPWD/$p 2>&1 || patch -p1 < $OLDPWD/$p); fi
  (cd $d && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg_$(basename $d).log 2>&1 && cmake --build build -j 16 --target tiny_llama >/tmp/build_$(basename $d).log 2>&1) || { tail -30 /tmp/build_$(basename $d).log; exit 1; }
}
build . "" && build /tmp/ta .dev/rms-preload.patch && build /tmp/tb .dev/rms-preload-2.patch
echo "built $(el) s"; grep -c "in_cached" /tmp/ta/src/ops/rmsnorm.cu /tmp/tb/src/ops/rmsnorm.cu src/ops/rmsnorm.cu
declare -A BIN=([base]=build/tiny_llama [a]=/tmp/ta/build/tiny_llama [b]=/tmp/tb/build/tiny_llama)
for R in 1 2 3; do
  line="8x128 round $R:"
  for V in base a b; do timeout 60 ${BIN[$V]} bench --device cuda --levels v6 --precisions bf16 --repeats 3 --batch-sizes 8 --seq-lens 128 > $L/b128_${V}_$R.log 2>&1; line+=" $V $(grep -E '^v6 ' $L/b128_${V}_$R.log | awk '{print $5}')"; done
  echo "$line"
done
line="8x256:"
for V in base a b; do timeout 60 ${BIN[$V]} bench --device cuda --levels v6 --precisions bf16 --repeats 3 --batch-sizes 8 --seq-lens 256 > $L/b256_$V.log 2>&1; line+=" $V $(grep -E '^v6 ' $L/b256_$V.log | awk '{print $5}')"; done
echo "$line"
for V in base a b; do
  timeout 60 ${BIN[$V]} --device cuda --version v6 --use-amp --seq-len 128 --num-steps 15 --timing-warmup-steps 10 --profile-steps 3 --profile $L/prof_$V > $L/prof_$V.log 2>&1
  echo "$V: $(grep -E '= .* busy' $L/prof_$V.log | head -1) | $(grep rmsnorm_fused_backward $L/prof_$V/kernels.csv | cut -d, -f1-4 | head -2 | tr '\n' ' ')"
  gzip -f $L/prof_$V/trace.json
done
echo "== done $(el) s"
