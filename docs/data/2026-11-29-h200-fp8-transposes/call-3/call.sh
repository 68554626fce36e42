#!/usr/bin/env bash
# One H200: what SwiGLU's sigmoid (__expf, __fdividef) changes in v4's bf16 training bits against
# head c949645 (.dev/c949645.tgz), then as many of the twenty-step plans as fit.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
T0=$(date +%s); L=$OUT/logs; mkdir -p $L
trap 'tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L' EXIT
el() { echo $(( $(date +%s) - T0 )); }
mkdir -p /tmp/head && tar xzf .dev/c949645.tgz -C /tmp/head
(cmake -S /tmp/head -B /tmp/head/build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfgh.log 2>&1 && cmake --build /tmp/head/build -j 4 --target tiny_llama >/tmp/buildh.log 2>&1) & HP=$!
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j 12 >/tmp/build.log 2>&1) || { grep -B2 -A10 error /tmp/build.log | head -40; exit 1; }
wait $HP || { grep -B2 -A10 error /tmp/buildh.log | head -20; exit 1; }
echo "built $(el) s"
H=/tmp/head/build/tiny_llama; N=build/tiny_llama
for b in head new; do bin=$N; [ $b = head ] && bin=$H
  timeout 60 $bin --device cuda --version v4 --use-amp --preset gpt2-small --num-steps 8 --log-every 1 --grad-clip 1000 --json $L/run_v4_$b.json > $L/run_v4_$b.log 2>&1 || tail -3 $L/run_v4_$b.log
  timeout 60 $bin --device cuda --version v4 --use-amp --num-steps 20 --log-every 1 --json $L/run_v4d_$b.json > $L/run_v4d_$b.log 2>&1 || tail -3 $L/run_v4d_$b.log
done
python3 -c "
import json
for n in ('v4','v4d'):
  a,b=[[(s['loss'],s['grad_norm']) for s in json.load(open('$L/run_%s_%s.json'%(n,c)))['steps']] for c in ('head','new')]
  dl=max(abs(x[0]-y[0]) for x,y in zip(a,b)); dg=max(abs(x[1]-y[1])/x[1] for x,y in zip(a,b))
  print(n, len(a), 'steps; step 1 loss', a[0][0], '->', b[0][0], 'grad norm', a[0][1], '->', b[0][1], '; largest loss difference %.3g, grad norm %.3g relative' % (dl, dg))"
echo "== bits $(el) s"
cd build
R='TwentyStepsTrackTheCpu|GpuOps'
ctest -L "^gpu$" -R "$R" -N | tail -1
t=$(( 290 - $(( $(date +%s) - T0 )) ))
timeout $t ctest -L "^gpu$" -R "$R" -j 12 --timeout 200 --output-on-failure > $L/gpu-tests.log 2>&1; echo "ctest rc $?"
grep -E "tests passed|tests failed|Total Test time|\*\*\*Failed|\(Failed\)|\(Timeout\)" $L/gpu-tests.log | head -20
sed -nE 's/.*Test +#[0-9]+: ([^ ]+) \.+ +Passed.*/\1/p' $L/gpu-tests.log > $L/passed.txt
ctest -L "^gpu$" -R "$R" -N | sed -nE 's/^ *Test +#[0-9]+: (.*)$/\1/p' > $L/selected.txt
echo "passed: $(wc -l < $L/passed.txt) of $(wc -l < $L/selected.txt); done $(el) s"
