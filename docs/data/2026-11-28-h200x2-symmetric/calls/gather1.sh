#!/usr/bin/env bash
# The gathered lookup (this tree) against its parent (base.tgz, built beside) in one job: the
# multigpu tests, then bench at gpt2-small, medium and the default shape with accumulation.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
N=$(nproc)
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$N" >/tmp/build.log 2>&1) || { tail -30 /tmp/cfg.log /tmp/build.log; exit 1; }
mkdir -p /tmp/base && tar xzf .dev/base.tgz -C /tmp/base && (cd /tmp/base && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg2.log 2>&1 && cmake --build build -j "$N" --target tiny_llama >/tmp/build2.log 2>&1) || { tail -30 /tmp/cfg2.log /tmp/build2.log; exit 1; }
L=$OUT/logs; mkdir -p $L; G=$(nvidia-smi -L | wc -l)
if [ -z "${NOTESTS:-}" ]; then
echo "== multigpu tests $(date +%T)"
(cd build && timeout 300 ctest -L multigpu --output-on-failure > $L/multigpu.log 2>&1)
grep -E "tests passed|tests failed" $L/multigpu.log; grep -E "Failure|Expected|Which is|actual|\[ killed|\[ signal|\[ error" $L/multigpu.log | head -20
fi
for spec in ${SPECS:-"gpt2-small:--preset gpt2-small" "default-accum4:--batch-size 8 --seq-len 128 --grad-accum-steps 4" "medium:--preset medium"}; do
  name=${spec%%:*}
  for tree in base new; do
    bin=build/tiny_llama; [ $tree = base ] && bin=/tmp/base/build/tiny_llama
    echo "== $name $tree $(date +%T)"
    timeout 300 $bin bench --nproc-per-node $G --device cuda --version ${VERSION:-v4} --use-amp ${spec#*:} --num-steps 60 --timing-warmup-steps 10 --log-every 1000 \
      --json $L/${name}_$tree.json > $L/${name}_$tree.log 2>&1 || tail -20 $L/${name}_$tree.log
    grep -E "^\| [0-9]" $L/${name}_$tree.log
  done
done
tar czf $OUT/logs.tgz -C $L . && rm -rf $L
echo "== done $(date +%T)"
