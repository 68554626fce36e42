#!/usr/bin/env python3
"""Per-task times of block_forward_gemm_kernel's last launch, the first form (five stages, the norm
inside the last residual tile's block): the trace-tasks.patch lines of this call."""
import sys, statistics as st
lines = [l.split() for l in open(sys.argv[1]) if l.startswith('TASK ')]
per_launch = int(sys.argv[2]) if len(sys.argv) > 2 else 3584
L = lines[-per_launch:]
sizes = [128, 64, 64, 128, 64]; names = ['qkv', 'attention', 'output', 'gate/up', 'down']
per_layer = sum(sizes)
rows = []
for f in L:
    task, sm, t0, tw, t2, n0, n1 = int(f[1]), int(f[2]), *map(int, f[3:])
    l, rest = divmod(task, per_layer); s = 0
    while rest >= sizes[s]: rest -= sizes[s]; s += 1
    m = rest // (sizes[s] // 8)
    rows.append(dict(task=task, sm=sm, t0=t0, tw=tw, t2=t2, n0=n0, n1=n1, l=l, s=s, m=m))
T0 = min(r['t0'] for r in rows); T1 = max(r['t2'] for r in rows)
print(f"launch span {(T1 - T0) / 1e3:.1f} us, {len(rows)} tasks on {len(set(r['sm'] for r in rows))} SMs")
for s in range(5):
    rs = [r for r in rows if r['s'] == s]
    run = [(r['t2'] - r['tw'] - ((r['n1'] - r['n0']) if r['n0'] else 0)) / 1e3 for r in rs]
    wait = [(r['tw'] - r['t0']) / 1e3 for r in rs]
    print(f"{names[s]:10s} n {len(rs):4d}  run median {st.median(run):6.2f} mean {st.mean(run):6.2f} us   wait median {st.median(wait):6.2f} mean {st.mean(wait):6.2f} us")
norms = [(r['n1'] - r['n0']) / 1e3 for r in rows if r['n0']]
print(f"norms n {len(norms)} median {st.median(norms):.2f} mean {st.mean(norms):.2f} us")
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
for m in (0, 7):
    print(f"layer 3, row block {m}:")
    for s in range(5):
        rs = [r for r in rows if r['l'] == 3 and r['m'] == m and r['s'] == s]
        print(f"  {names[s]:10s} taken {(min(r['t0'] for r in rs) - T0) / 1e3:7.1f}  runs {(min(r['tw'] for r in rs) - T0) / 1e3:7.1f} .. {(max(r['t2'] for r in rs) - T0) / 1e3:7.1f}" +
              (f"  norm {(max(r['n0'] for r in rs) - T0) / 1e3:.1f} .. {(max(r['n1'] for r in rs) - T0) / 1e3:.1f}" if s in (2, 4) else ''))
