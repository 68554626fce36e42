#!/usr/bin/env python3
"""Where the backward's own chain waits, read from a trace: each gap of more than 2 us between the
chain's kernels in the last profiled step, with the kernels on either side.

  python3 docs/data/2026-11-30-h200-dw-tiles-beside/gaps.py DIR/trace.json.gz

The chain as chain.py (docs/data/2026-11-30-h200-weight-gradients-behind) takes it: the backward's
kernels less the optimizer's and the weight gradients' lane. A gap: the next kernel starts more
than 2 us after the chain's kernels so far have ended."""
import sys

sys.path.insert(0, "scripts/profile")
from overlap import per_step, trace_events, trace_kernels  # noqa: E402

path = sys.argv[1]
step = per_step(trace_kernels(path, trace_events(path)))[-1]
chain = sorted((e for e in step if e["args"].get("region", "").startswith("backward") and
                not {"optimizer", "weight_gradients"} & set(e["args"]["region"].split("/"))), key=lambda e: e["ts"])
end, before, total = None, None, 0.0
for e in chain:
    if end is not None and e["ts"] - end > 2.0:
        total += e["ts"] - end
        print(f"{e['ts'] - end:6.1f} us after {before['name'][:30]} ({before['args']['region']}) "
              f"before {e['name'][:30]} ({e['args']['region']})")
    end, before = max(end or 0.0, e["ts"] + e["dur"]), e
print(f"{total:.1f} us in gaps of more than 2 us")
