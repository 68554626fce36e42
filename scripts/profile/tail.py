#!/usr/bin/env python3
"""What each profiled step waits for at its end, read from a trace.

  python3 scripts/profile/tail.py DIR/trace.json [--us 80]   (or .json.gz)

The trace (tiny_llama --profile) has every kernel of the profiled steps. For each step it lists
the kernels that run in the step's last US microseconds (default 80): when each starts and ends,
in microseconds before the step's last kernel ends, its model range and its name. Then how long
the step runs on after its last kernel outside the optimizer has ended: the updates that nothing
else runs beside at the end (part of the profile's "optimizer alone"). A kernel is the optimizer's
when a level of its range is named "optimizer", as in the profile's accounts; copies between host
and GPU are left out, as there (the host paces them)."""
import argparse
import sys

from overlap import per_step, trace_events, trace_kernels


def optimizer(e):
    return "optimizer" in e["args"].get("region", "").split("/")


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("trace", help="DIR/trace.json (or .json.gz) of tiny_llama --profile")
    parser.add_argument("--us", type=float, default=80.0, help="the step's last microseconds to list (default 80)")
    a = parser.parse_args(argv)
    if a.us <= 0:
        parser.error("--us: a positive number of microseconds")
    path, window = a.trace, a.us
    try:
        events = trace_events(path)
    except (OSError, ValueError) as err:
        sys.exit(f"{path}: not a readable trace ({err})")
    for ks in per_step(trace_kernels(path, events)):
        end = max(e["ts"] + e["dur"] for e in ks)
        step = ks[0]["args"].get("step", 0)
        print(f"step {step}: {end - ks[0]['ts']:.1f} us from its first kernel to its last; its last {window:g} us "
              "(start and end, us before the step's end):")
        for e in ks:
            if e["ts"] + e["dur"] > end - window:
                print(f"  {e['ts'] - end:8.1f} {e['ts'] + e['dur'] - end:8.1f}  {e['args'].get('region', '')[:36]:36s}"
                      f"  {e['name'][:60]}")
        rest = [e["ts"] + e["dur"] for e in ks if not optimizer(e)]
        alone = end - max(rest) if rest else end - ks[0]["ts"]
        print(f"  the step runs {alone:.1f} us after its last kernel outside the optimizer")


if __name__ == "__main__":
    main(sys.argv[1:])
