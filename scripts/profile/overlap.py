#!/usr/bin/env python3
"""How much of the gradient reduction hides behind the backward pass, read from a trace.

  python3 scripts/profile/overlap.py DIR/trace.json [--one-gpu ONE/trace.json]   (or .json.gz)

The trace (tiny_llama --profile, rank 0 of a data-parallel run) has every kernel of the
profiled steps. NCCL's kernels (names starting with "nccl") are the communication; the others
are the computation. Per step it prints the communication time, the part of it during which a
computation kernel ran too (hidden), and the part during which none did (exposed: the step
waits for it). With --one-gpu, the trace of the same training on one GPU: the backward pass's
own kernels (not NCCL's, not the optimizer's behind it) take longer beside the reductions, since
they share the SMs and the memory bandwidth with NCCL's kernels; it prints their kernel time per
step on one GPU and here, and the kernels that grew most (each kernel of the backward against the
same one in the one-GPU trace, summed by region and name): a product sized to one wave of every SM
needs a second wave when a reduction holds some of them."""
import gzip
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


def backward_own(e):
    region = e["args"].get("region", "")
    return (region.startswith("backward/") and not e["name"].lower().startswith("nccl") and
            not any(part in region for part in ("optimizer", "gradient_reduction", "parameter_gather")))


def trace_events(path):
    """The events of a trace written by tiny_llama --profile (.json, or .json.gz)."""
    events = json.load(gzip.open(path, "rt") if path.endswith(".gz") else open(path))
    return events["traceEvents"] if isinstance(events, dict) else events


def trace_kernels(path, events):
    """Its kernels (and memsets) on the GPU track: copies between host and GPU left out."""
    kernels = [e for e in events if e.get("ph") == "X" and e.get("tid") == 1 and not e["name"].startswith("memcpy")]
    if not kernels:
        sys.exit(f"{path}: no kernels in the trace")
    return kernels


def read(path):
    events = trace_events(path)
    kernels = trace_kernels(path, events)
    steps = len({e["args"]["step"] for e in events if e.get("tid") == 2 and "step" in e.get("args", {})}) or 1
    comm = merged([(e["ts"], e["ts"] + e["dur"]) for e in kernels if e["name"].lower().startswith("nccl")])
    compute = merged([(e["ts"], e["ts"] + e["dur"]) for e in kernels if not e["name"].lower().startswith("nccl")])
    backward = [e for e in kernels if backward_own(e)]
    return steps, comm, compute, backward


def per_step(kernels):
    """The kernels of each step in the order they started."""
    by_step = {}
    for e in sorted(kernels, key=lambda e: e["ts"]):
        by_step.setdefault(e["args"].get("step", 0), []).append(e)
    return list(by_step.values())


def grown(backward, backward1, top=6):
    """Added time a step per (region, kernel name) of the backward against one GPU's; whether the
    steps ran the same kernels in the same order is said, since only then is it kernel for kernel."""
    here, there = per_step(backward), per_step(backward1)
    names = [[e["name"] for e in s] for s in here + there]
    added, calls = {}, {}
    for steps, sign in ((here, 1), (there, -1)):
        for s in steps:
            for e in s:
                key = (e["args"].get("region", "").split("/")[-1], e["name"])
                added[key] = added.get(key, 0.0) + sign * e["dur"] / len(steps)
                if sign > 0:
                    calls[key] = calls.get(key, 0) + 1
    same = "the same kernels in the same order" if all(n == names[0] for n in names) else "different kernels"
    print(f"the kernels that grew most, per step (both traces ran {same}):")
    for key, us in sorted(added.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {us:+7.0f} us  {calls.get(key, 0) // max(len(here), 1):3d} calls  {key[0]:16s} {key[1][:60]}")


def main(path, one_gpu=None):
    steps, comm, compute, backward = read(path)
    total = sum(b - a for a, b in comm)
    hidden = sum(covered(a, b, compute) for a, b in comm)
    busy = sum(b - a for a, b in merged(comm + compute))
    print(f"{steps} steps; per step: communication {total / steps:.0f} us, of which {hidden / steps:.0f} us "
          f"({100 * hidden / max(total, 1e-9):.0f}%) ran beside computation kernels and {(total - hidden) / steps:.0f} us "
          f"was exposed; GPU busy {busy / steps:.0f} us")
    if one_gpu:
        steps1, _, _, backward1 = read(one_gpu)
        here = sum(e["dur"] for e in backward) / steps
        there = sum(e["dur"] for e in backward1) / steps1
        print(f"the backward pass's own kernels: {there:.0f} us per step on one GPU, {here:.0f} us beside the "
              f"reductions ({here - there:+.0f} us, {100 * (here - there) / there:+.1f}%)")
        grown(backward, backward1)


if __name__ == "__main__":
    args = sys.argv[1:]
    if args and args[0] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0)
    if len(args) == 3 and args[1] == "--one-gpu":
        main(args[0], args[2])
    elif len(args) == 1:
        main(args[0])
    else:
        sys.exit(__doc__)
