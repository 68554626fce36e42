#!/usr/bin/env python3
"""The end of a profiled step's backward, kernel by kernel on every stream, read from a trace.

  python3 docs/data/2026-11-30-h200-dw-tiles-beside/tail.py DIR/trace.json.gz [US]

The kernels that start in the last step's final US microseconds (110 by default) before its
embedding's sort, or run across that moment; times in us from the sort's start: start, duration,
end, name, region, stream."""
import sys

sys.path.insert(0, "scripts/profile")
from overlap import trace_events  # noqa: E402

path, span = sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 110.0
kernels = sorted((e for e in trace_events(path) if e.get("ph") == "X" and e.get("tid") == 1), key=lambda e: e["ts"])
t = [e for e in kernels if "radix_sort" in e["name"]][-1]["ts"]
for e in kernels:
    if t - span < e["ts"] + e["dur"] and e["ts"] < t + 60:
        print(f"{e['ts'] - t:8.1f} {e['dur']:6.1f} {e['ts'] + e['dur'] - t:8.1f}  {e['name'][:40]:40s} "
              f"{e['args'].get('region', '')} (stream {e['args'].get('stream', '')})")
