#!/usr/bin/env python3
"""Where the forward's and the backward's own chains spend their time, read from a trace.

  python3 scripts/profile/chain.py DIR/trace.json [--beside REGION ...] [--gaps US]   (or .json.gz)

A pass's chain: its kernels (model ranges forward/... or backward/...) less the ones that run
beside it, the optimizer's always and those of each range named by --beside (weight_gradients,
where weight-gradients-behind puts a layer's weight gradients on a lane of their own). A kernel
adds to its chain its end less the later of its start and the end of the chain's kernels before it
(under programmatic launch a kernel starts while the one before it ends, so durations overlap):
the rows, by kernel name, add up to the chain's kernel time, and the rest of the chain lies
between its kernels. Per pass, us a step, the mean of the profiled steps; then the kernels beside
it with their own time. With --gaps US, each wait of more than US microseconds between the
backward chain's kernels in the last profiled step, with the kernels on either side."""
import argparse
import sys

from overlap import per_step, trace_events, trace_kernels


def regions(e):
    return set(e["args"].get("region", "").split("/"))


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("trace", help="DIR/trace.json (or .json.gz) of tiny_llama --profile")
    parser.add_argument("--beside", nargs="*", default=[], metavar="REGION",
                        help="ranges whose kernels run beside the chains, besides the optimizer's")
    parser.add_argument("--gaps", type=float, metavar="US", help="list the backward's waits longer than US")
    a = parser.parse_args(argv)
    if a.gaps is not None and a.gaps < 0:
        parser.error("--gaps: a number of microseconds, 0 or more")
    try:
        events = trace_events(a.trace)
    except (OSError, ValueError) as err:
        sys.exit(f"{a.trace}: not a readable trace ({err})")
    steps = per_step(trace_kernels(a.trace, events))
    beside = {"optimizer", *a.beside}
    for name in ("forward", "backward"):
        added, calls, aside, aside_calls, span = {}, {}, {}, {}, 0.0
        for s in steps:
            mine = [e for e in s if e["args"].get("region", "").startswith(name)]
            chain = sorted((e for e in mine if not beside & regions(e)), key=lambda e: e["ts"])
            end = None
            for e in chain:
                k = e["name"].split("<")[0][:44]
                added[k] = added.get(k, 0.0) + max(e["ts"] + e["dur"] - (e["ts"] if end is None else max(e["ts"], end)), 0.0)
                calls[k] = calls.get(k, 0) + 1
                end = max(end or 0.0, e["ts"] + e["dur"])
            if chain:
                span += end - chain[0]["ts"]
            for e in mine:
                if beside & regions(e):
                    k = e["name"].split("<")[0][:44]
                    aside[k] = aside.get(k, 0.0) + e["dur"]
                    aside_calls[k] = aside_calls.get(k, 0) + 1
        n = len(steps)
        print(f"{name}: {sum(added.values()) / n:.1f} us of kernels in a chain of {span / n:.1f} us a step")
        for k, v in sorted(added.items(), key=lambda x: -x[1]):
            print(f"  {v / n:7.1f} us  {calls[k] / n:5.1f} calls  {k}")
        for k, v in sorted(aside.items(), key=lambda x: -x[1]):
            print(f"  beside: {v / n:7.1f} us  {aside_calls[k] / n:5.1f} calls  {k}")
    if a.gaps is None:
        return
    chain = sorted((e for e in steps[-1] if e["args"].get("region", "").startswith("backward") and not beside & regions(e)),
                   key=lambda e: e["ts"])
    end, before, total = None, None, 0.0
    print(f"the backward's waits of more than {a.gaps:g} us in the last profiled step:")
    for e in chain:
        if end is not None and e["ts"] - end > a.gaps:
            total += e["ts"] - end
            print(f"  {e['ts'] - end:6.1f} us after {before['name'].split('<')[0][:36]} ({before['args']['region']}) "
                  f"before {e['name'].split('<')[0][:36]} ({e['args']['region']})")
        if end is None or e["ts"] + e["dur"] > end:
            end, before = e["ts"] + e["dur"], e
    print(f"  {total:.1f} us in all")


if __name__ == "__main__":
    main(sys.argv[1:])
