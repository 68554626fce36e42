#!/usr/bin/env python3
"""Each kernel family's share of the forward's and the backward's own chain, read from a trace.

  python3 docs/data/2026-11-30-h200-weight-gradients-behind/chain.py DIR/trace.json.gz [REGION ...]

The chain: a pass's kernels (region forward/... or backward/...) less those of the regions that
run on a lane beside it: the optimizer's always, and each REGION named (weight_gradients, where
weight-gradients-behind puts them on their own lane). A kernel adds to its chain its end less the
later of its start and the end of the chain's kernels before it (under programmatic launch a
kernel starts while the one before it ends, so durations overlap). Per pass, us a step, the mean
of the profiled steps; the rows add up to the chain's covered time. The kernels beside are listed
after, with their own time."""
import sys

sys.path.insert(0, "scripts/profile")
from overlap import per_step, trace_events, trace_kernels  # noqa: E402

path = sys.argv[1]
beside = {"optimizer", *sys.argv[2:]}
steps = per_step(trace_kernels(path, trace_events(path)))
for name in ("forward", "backward"):
    added, calls, span, aside, aside_calls = {}, {}, 0.0, {}, {}
    for s in steps:
        mine = [e for e in s if e["args"].get("region", "").startswith(name)]
        chain = sorted((e for e in mine if not beside & set(e["args"]["region"].split("/"))), key=lambda e: e["ts"])
        end = None
        for e in chain:
            a = e["ts"] + e["dur"] - (e["ts"] if end is None else max(e["ts"], end))
            end = max(end or 0.0, e["ts"] + e["dur"])
            k = e["name"].split("<")[0][:44]
            added[k] = added.get(k, 0.0) + max(a, 0.0)
            calls[k] = calls.get(k, 0) + 1
        span += end - chain[0]["ts"]
        for e in mine:
            if beside & set(e["args"]["region"].split("/")):
                k = e["name"].split("<")[0][:44]
                aside[k] = aside.get(k, 0.0) + e["dur"]
                aside_calls[k] = aside_calls.get(k, 0) + 1
    n = len(steps)
    print(f"{name}: {sum(added.values()) / n:.1f} us of kernels in a chain of {span / n:.1f} us a step")
    for k, v in sorted(added.items(), key=lambda x: -x[1]):
        print(f"  {v / n:7.1f} us  {calls[k] / n:5.1f} calls  {k}")
    for k, v in sorted(aside.items(), key=lambda x: -x[1]):
        print(f"  beside: {v / n:7.1f} us  {aside_calls[k] / n:5.1f} calls  {k}")
