#!/usr/bin/env python3
"""How much of the gradient reduction hides behind the backward pass, read from a trace.

  python3 scripts/profile/overlap.py DIR/trace.json

The trace (tiny_llama --profile, rank 0 of a data-parallel run) has every kernel of the
profiled steps. NCCL's kernels (names starting with "nccl") are the communication; the others
are the computation. For each step's span it prints the communication time, the part of it
during which a computation kernel ran too (hidden), and the part during which none did
(exposed: the step waits for it)."""
import json
import sys


def merged(intervals):
    out = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def covered(a, b, spans):
    return sum(max(0.0, min(b, y) - max(a, x)) for x, y in spans)


def main(path):
    events = json.load(open(path))
    events = events["traceEvents"] if isinstance(events, dict) else events
    kernels = [e for e in events if e.get("ph") == "X" and e.get("tid") == 1]
    if not kernels:
        sys.exit(f"{path}: no kernels in the trace")
    comm = [(e["ts"], e["ts"] + e["dur"]) for e in kernels if e["name"].lower().startswith("nccl")]
    compute = merged([(e["ts"], e["ts"] + e["dur"]) for e in kernels if not e["name"].lower().startswith("nccl")])
    comm_spans = merged(comm)
    total = sum(b - a for a, b in comm_spans)
    hidden = sum(covered(a, b, compute) for a, b in comm_spans)
    first = min(e["ts"] for e in kernels)
    last = max(e["ts"] + e["dur"] for e in kernels)
    busy = sum(b - a for a, b in merged(comm_spans + compute))
    print(f"kernels: {len(kernels)} ({len(comm)} NCCL) over {last - first:.0f} us of trace")
    print(f"communication: {total:.0f} us, of which {hidden:.0f} us ({100 * hidden / max(total, 1e-9):.0f}%) ran beside "
          f"computation kernels and {total - hidden:.0f} us was exposed")
    print(f"GPU busy {busy:.0f} us of {last - first:.0f} us")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0)
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
