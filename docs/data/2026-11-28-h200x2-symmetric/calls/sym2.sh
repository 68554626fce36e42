#!/usr/bin/env bash
# Traces of medium: one GPU, two ranks with and without the symmetric window; NCCL's kernels by name.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/tmp/cfg.log 2>&1 && cmake --build build -j "$(nproc)" >/tmp/build.log 2>&1) || { tail -30 /tmp/cfg.log /tmp/build.log; exit 1; }
L=$OUT/logs; mkdir -p $L
T="build/tiny_llama --device cuda --version v4 --use-amp --preset ${PRESET:-medium} --num-steps 16 --timing-warmup-steps 10 --profile-steps 3 --log-every 1000"
timeout 200 $T --profile $L/one > $L/one.log 2>&1 || tail $L/one.log
for v in ${VARIANTS:-"NCCL_WIN_ENABLE=1" "NCCL_WIN_ENABLE=0"}; do
  win=${v//[^0-9A-Za-z]/_}
  env $v NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=REG,TUNING timeout 200 $T --nproc-per-node 2 --profile $L/two$win > $L/two$win.log 2>&1 || tail $L/two$win.log
  echo "== $v"; grep -E "Average batch" $L/two$win.log
  grep -iE "sym|window|segment" $L/two$win.log | sed 's/^.*NCCL INFO //' | sort | uniq -c | sort -rn | head -8
  python3 - $L/two$win/trace.json <<'PY'
import json,sys,collections
t=json.load(open(sys.argv[1])); ev=t['traceEvents'] if isinstance(t,dict) else t
d=collections.defaultdict(lambda:[0,0.0])
for e in ev:
  n=e.get('name','')
  if 'nccl' in n.lower() and e.get('ph')=='X': d[n][0]+=1; d[n][1]+=e.get('dur',0)
for n,(c,u) in sorted(d.items(),key=lambda x:-x[1][1])[:6]: print(f"{c:5d} {u/1000:9.2f} ms  {n[:110]}")
PY
  python3 scripts/profile/overlap.py $L/two$win/trace.json --one-gpu $L/one/trace.json
done
gzip $L/*/trace.json; tar czf $OUT/logs.tgz -C $L . && rm -rf $L
