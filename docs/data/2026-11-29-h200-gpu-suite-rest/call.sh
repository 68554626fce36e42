#!/usr/bin/env bash
# The whole GPU suite (ctest -L ^gpu$) at this tree, as far as one call reaches; the names of the
# tests that passed go to logs/passed.txt so that a next call can run the rest.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$(nproc)" >/tmp/build.log 2>&1) || { grep -B2 -A10 "error" /tmp/build.log | head -60; exit 1; }
echo "built $(( $(date +%s) - T0 )) s"
cd build
ctest -L "^gpu$" -N | sed -nE 's/^ *Test +#([0-9]+): (.*)$/\1 \2/p' > $L/all.txt
if [ -f ../.dev/passed-today.txt ]; then
  awk 'NR==FNR{p[$1]=1; next} !($2 in p){print $1}' ../.dev/passed-today.txt $L/all.txt > /tmp/todo.txt
else
  cut -d' ' -f1 $L/all.txt > /tmp/todo.txt
fi
echo "$(wc -l < $L/all.txt) gpu tests, $(wc -l < /tmp/todo.txt) to run"
t=$(( ${T_LIMIT:-590} - ($(date +%s) - T0) ))
timeout $t ctest -I "0,0,0,$(paste -sd, /tmp/todo.txt)" -j ${J:-10} --timeout 250 --output-on-failure > $L/gpu-tests.log 2>&1; echo "rc $?"
grep -E "tests passed|tests failed|Total Test time|\*\*\*Failed|\(Failed\)|\(Timeout\)|Not Run" $L/gpu-tests.log | head -20
sed -nE 's/.*Test +#[0-9]+: ([^ ]+) \.+ +Passed.*/\1/p' $L/gpu-tests.log > $L/passed.txt
echo "passed: $(wc -l < $L/passed.txt)"
