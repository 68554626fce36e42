# The last kernels of each profiled step, in start order: name, stream, region, start (us from the
# step's first kernel), duration, and when the step's main stream ended against its last kernel.
import json, sys, collections
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X" and e.get("tid") == 1]
steps = collections.defaultdict(list)
for e in ev: steps[e["args"]["step"]].append(e)
for s in sorted(steps)[-1:]:
    k = sorted(steps[s], key=lambda e: e["ts"]); t0 = k[0]["ts"]; end = max(e["ts"] + e["dur"] for e in k)
    print(f"step {s}: {len(k)} records, {end - t0:.1f} us first to last")
    for e in k:
        if e["ts"] + e["dur"] > end - 160 or e["ts"] > end - 200:
            print(f'  {e["ts"]-t0:8.1f} +{e["dur"]:6.1f} -> {e["ts"]+e["dur"]-t0:8.1f}  s{e["args"]["stream"]}  {e["args"]["region"][:40]:40s} {e["name"][:60]}')
    by = collections.defaultdict(float)
    last_main = max(e["ts"] + e["dur"] for e in k if "optimizer" not in e["args"]["region"])
    print(f"  last kernel outside the optimizer ends at {last_main - t0:.1f}; the step at {end - t0:.1f}")
