#!/usr/bin/env python3
"""Per-task times of block_backward_gemm_kernel's last launch in a TT_TASK_TRACE file (trace.patch;
plain or .gz): each stage's tasks (run: from the end of its wait to its end), and each stage of each
layer from its first task's start to its last task's end, in the launch's order (layer 0 is the
launch's first, the model's last)."""
import gzip, sys, statistics as st
text = (gzip.open if sys.argv[1].endswith(".gz") else open)(sys.argv[1], "rt").read().split('LAUNCH ')[-1].split('\n')
head = list(map(int, text[0].split()))
total, per_layer, blocks, tiles = head[0], head[1], head[2], head[3:]
names = ['SwiGLU', 'gate/up dx', 'FFN norm', 'output dx', 'attention', 'QKV dx', 'attn norm', 'dW']
rows = []
for f in (l.split() for l in text if l.startswith('TASK ')):
    task, sm, t0, tw, t2 = map(int, f[1:6])
    l, rest = divmod(task, per_layer); s = 0
    while rest >= tiles[s]: rest -= tiles[s]; s += 1
    rows.append(dict(task=task, sm=sm, t0=t0, tw=tw, t2=t2, l=l, s=s))
T0 = min(r['t0'] for r in rows); T1 = max(r['t2'] for r in rows)
busy = sum(r['t2'] - r['tw'] for r in rows)
print(f"launch span {(T1 - T0) / 1e3:.1f} us, {len(rows)} tasks on {len(set(r['sm'] for r in rows))} SMs "
      f"({blocks} blocks); tasks running {busy / 1e3:.0f} of {blocks * (T1 - T0) / 1e3:.0f} SM-us")
print(f"{'stage':11s} {'tasks':>5s} {'run median':>10s} {'mean':>6s} {'max':>6s} {'wait mean':>9s}   (us, all layers)")
for s in range(len(names)):
    rs = [r for r in rows if r['s'] == s]
    run = [(r['t2'] - r['tw']) / 1e3 for r in rs]
    wait = [(r['tw'] - r['t0']) / 1e3 for r in rs]
    print(f"{names[s]:11s} {len(rs):5d} {st.median(run):10.2f} {st.mean(run):6.2f} {max(run):6.2f} {st.mean(wait):9.2f}")
print("each stage of each layer: its first task's run start .. its last task's end, us from the launch's start")
for l in sorted(set(r['l'] for r in rows)):
    for s in range(len(names)):
        rs = [r for r in rows if r['l'] == l and r['s'] == s]
        a, b = min(r['tw'] for r in rs), max(r['t2'] for r in rs)
        print(f"  layer {l} {names[s]:11s} {(a - T0) / 1e3:7.1f} .. {(b - T0) / 1e3:7.1f}  ({(b - a) / 1e3:5.1f})")
