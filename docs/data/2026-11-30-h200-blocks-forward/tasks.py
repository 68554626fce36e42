#!/usr/bin/env python3
"""Per-task times of block_forward_gemm_kernel's last launch in a TT_TASK_TRACE file (trace-tasks.patch):
argv[2] the residual tiles a row block (8 of 128 x 64, 16 of 128 x 32)."""
import sys, statistics as st
text = open(sys.argv[1]).read().split('LAUNCH ')[-1].split('\n')
L = [l.split() for l in text if l.startswith('TASK ')]
res = int(sys.argv[2]) if len(sys.argv) > 2 else 8
sizes = [128, 64, 8 * res, 64, 128, 8 * res, 64]; names = ['qkv', 'attention', 'output', 'ffn norm', 'gate/up', 'down', 'next norm']
per_layer = sum(sizes)
rows = []
for f in L:
    task, sm, t0, tw, t2, n0, n1 = int(f[1]), int(f[2]), *map(int, f[3:])
    l, rest = divmod(task, per_layer); s = 0
    while rest >= sizes[s]: rest -= sizes[s]; s += 1
    m = rest // (sizes[s] // 8)  # eight row blocks
    rows.append(dict(task=task, sm=sm, t0=t0, tw=tw, t2=t2, n0=n0, n1=n1, l=l, s=s, m=m))
T0 = min(r['t0'] for r in rows); T1 = max(r['t2'] for r in rows)
print(f"launch span {(T1 - T0) / 1e3:.1f} us, {len(rows)} tasks on {len(set(r['sm'] for r in rows))} SMs")
for s in range(7):
    rs = [r for r in rows if r['s'] == s]
    run = [(r['t2'] - r['tw']) / 1e3 for r in rs]
    wait = [(r['tw'] - r['t0']) / 1e3 for r in rs]
    print(f"{names[s]:10s} n {len(rs):4d}  run median {st.median(run):6.2f} mean {st.mean(run):6.2f} us   wait median {st.median(wait):6.2f} mean {st.mean(wait):6.2f} us")
by_sm = {}
for r in rows: by_sm.setdefault(r['sm'], []).append(r)
gaps = []
for sm, rs in by_sm.items():
    rs.sort(key=lambda r: r['t0'])
    gaps += [(b['t0'] - a['t2']) / 1e3 for a, b in zip(rs, rs[1:])]
print(f"between a block's tasks: median {st.median(gaps):.2f} mean {st.mean(gaps):.2f} us")
tot_wait = sum(r['tw'] - r['t0'] for r in rows) / 1e3; tot_run = sum(r['t2'] - r['tw'] for r in rows) / 1e3
print(f"SM-us: waiting {tot_wait:.0f}, running {tot_run:.0f}, between {sum(gaps):.0f}, span x SMs {(T1 - T0) / 1e3 * len(by_sm):.0f}")
for l in range(8):
    rs = [r for r in rows if r['l'] == l]
    if not rs: continue
    a = min(r['t0'] for r in rs); b = max(r['t2'] for r in rs)
    first_run = min(r['tw'] for r in rs)
    print(f"layer {l}: first task {(a - T0) / 1e3:7.1f}  first run {(first_run - T0) / 1e3:7.1f}  last end {(b - T0) / 1e3:7.1f} us")
# one row block's chain in layer 3
for m in (0, 7):
    print(f"layer 3, row block {m}:")
    for s in range(7):
        rs = [r for r in rows if r['l'] == 3 and r['m'] == m and r['s'] == s]
        print(f"  {names[s]:10s} taken {(min(r['t0'] for r in rs) - T0) / 1e3:7.1f}  runs {(min(r['tw'] for r in rs) - T0) / 1e3:7.1f} .. {(max(r['t2'] for r in rs) - T0) / 1e3:7.1f}")
