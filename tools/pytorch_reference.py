#!/usr/bin/env python3
"""The same Tiny LLaMA in PyTorch, timed the way `tiny_llama bench` times ours.

Same configuration, the same initial values and data (the project's counter-based random
numbers, src/core/rng.h, reproduced with numpy), the same loss and AdamW, written the way a
careful engineer writes it: one product for Q, K and V and one for gate and up (as our v2 and
later), the output head padded to a multiple of 128 rows (as ours), fused AdamW. Modes:
  eager          plain PyTorch
  compile        torch.compile(model)
  graph          eager, the whole step (forward, backward, AdamW) captured in one CUDA graph
  compile+graph  torch.compile, and the whole step in one CUDA graph (the strongest)
The graph modes capture the step as PyTorch's CUDA-graph documentation shows for a whole
network: warm-up on a side stream, gradients set to None before the capture (so that each
replay writes them rather than zeroing and adding), capturable AdamW.
Precisions: fp32 (TF32 off) and bf16 (autocast, fp32 master weights and AdamW state).
Prints a table and writes the points as JSON (--json), in the bench's point format.
"""
import argparse
import json
import math
import statistics
import sys
import time

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as missing:
    if "-h" in sys.argv or "--help" in sys.argv:
        print(__doc__)
        sys.exit(0)
    sys.exit(f"pytorch_reference.py needs PyTorch and numpy ({missing}): it runs on a GPU machine that has them")

GOLDEN, C1, C2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
STREAM_DATA, STREAM_PARAM_BASE = 0x0DA7A, 0x100000


def mix64(x):
    with np.errstate(over="ignore"):  # the sums and products wrap modulo 2^64, as in C++
        x = np.asarray(x, dtype=np.uint64) + GOLDEN
        x = (x ^ (x >> np.uint64(30))) * C1
        x = (x ^ (x >> np.uint64(27))) * C2
        return x ^ (x >> np.uint64(31))


class CounterRng:
    """Value i of stream s under seed k, as in src/core/rng.h."""

    def __init__(self, seed, stream):
        self.key = mix64(np.uint64(seed) ^ mix64(np.uint64(stream)))

    def bits(self, i):
        return mix64(self.key + np.asarray(i, dtype=np.uint64))

    def uniform(self, i):
        return (self.bits(i) >> np.uint64(11)).astype(np.float64) * 2.0 ** -53

    def normal(self, n):
        i = np.arange(n, dtype=np.uint64)
        u1 = 1.0 - self.uniform(2 * i)
        u2 = self.uniform(2 * i + 1)
        return np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * math.pi * u2)

    def below(self, i, n):
        return ((self.bits(i) >> np.uint64(32)) * np.uint64(n)) >> np.uint64(32)


# Named shapes, as `tiny_llama --preset` (src/model/config.cpp): the model and the batch.
PRESETS = {
    "gpt2-small": dict(vocab_size=50257, hidden_dim=768, num_layers=12, num_heads=12, num_kv_heads=12, ffn=2048,
                       batch_sizes="16", seq_lens="1024"),
    "medium": dict(vocab_size=1000, hidden_dim=1024, num_layers=12, num_heads=16, num_kv_heads=8, ffn=4096,
                   batch_sizes="16", seq_lens="512"),
}


class TinyLlama(torch.nn.Module):
    def __init__(self, vocab, padded_vocab, hidden, layers, heads, kv_heads, ffn, seq_len, eps, theta):
        super().__init__()
        self.heads, self.kv_heads, self.d, self.eps, self.vocab = heads, kv_heads, hidden // heads, eps, vocab
        self.embed = torch.nn.Embedding(padded_vocab, hidden)  # rows from vocab on: zero padding
        lin = lambda i, o: torch.nn.Linear(i, o, bias=False)
        self.blocks = torch.nn.ModuleList()
        for _ in range(layers):
            b = torch.nn.Module()
            b.attn_norm = torch.nn.Parameter(torch.ones(hidden))
            b.qkv = lin(hidden, (heads + 2 * kv_heads) * self.d)  # q rows, then k, then v
            b.o = lin(heads * self.d, hidden)
            b.ffn_norm = torch.nn.Parameter(torch.ones(hidden))
            b.gate_up = lin(hidden, 2 * ffn)  # gate rows, then up rows
            b.down = lin(ffn, hidden)
            self.blocks.append(b)
        self.norm = torch.nn.Parameter(torch.ones(hidden))
        pos = np.arange(seq_len, dtype=np.float64)[:, None]
        inv = theta ** (-2.0 * np.arange(self.d // 2, dtype=np.float64) / self.d)
        self.register_buffer("cos", torch.tensor(np.cos(pos * inv), dtype=torch.float32), persistent=False)
        self.register_buffer("sin", torch.tensor(np.sin(pos * inv), dtype=torch.float32), persistent=False)

    def tensors_in_project_order(self):
        """The project's parameter tensors in the order of their random streams (src/model/params.h),
        as views: the real rows of the embedding, and q, k, v, gate, up as row blocks."""
        out = [self.embed.weight[:self.vocab]]
        q, kv = self.heads * self.d, self.kv_heads * self.d
        for b in self.blocks:
            w, f = b.qkv.weight, b.gate_up.weight.shape[0] // 2
            out += [b.attn_norm, w[:q], w[q:q + kv], w[q + kv:], b.o.weight, b.ffn_norm, b.gate_up.weight[:f],
                    b.gate_up.weight[f:], b.down.weight]
        return out + [self.norm]

    def rms(self, x, w):
        return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps).to(x.dtype) * w

    def rope(self, x):  # x [B, T, h, D], rotating interleaved pairs (2i, 2i+1)
        x0, x1 = x[..., 0::2], x[..., 1::2]
        c, s = self.cos[None, :, None, :].to(x.dtype), self.sin[None, :, None, :].to(x.dtype)
        return torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1).flatten(-2)

    def forward(self, tokens, targets):
        B, T = tokens.shape
        x = self.embed(tokens)
        q_width, kv_width = self.heads * self.d, self.kv_heads * self.d
        for b in self.blocks:
            h = self.rms(x, b.attn_norm)
            q, k, v = b.qkv(h).split([q_width, kv_width, kv_width], dim=-1)
            q = self.rope(q.view(B, T, self.heads, self.d)).transpose(1, 2)
            k = self.rope(k.view(B, T, self.kv_heads, self.d)).transpose(1, 2)
            v = v.view(B, T, self.kv_heads, self.d).transpose(1, 2)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.kv_heads != self.heads)
            x = x + b.o(a.transpose(1, 2).reshape(B, T, -1))
            gate, up = b.gate_up(self.rms(x, b.ffn_norm)).chunk(2, dim=-1)
            x = x + b.down(F.silu(gate) * up)
        logits = F.linear(self.rms(x, self.norm), self.embed.weight)  # tied head, padded rows
        logits = logits[..., :self.vocab]  # the padding takes no part in the softmax
        return F.cross_entropy(logits.float().reshape(-1, self.vocab), targets.view(-1))


def init_like_project(model, seed):
    with torch.no_grad():
        model.embed.weight.zero_()  # the padding rows stay zero: they get a zero gradient
        for i, p in enumerate(model.tensors_in_project_order()):
            if p.dim() == 1:
                p.fill_(1.0)
            else:
                values = 0.02 * CounterRng(seed, STREAM_PARAM_BASE + i).normal(p.numel())
                p.copy_(torch.tensor(values.astype(np.float32)).view_as(p))


def synthetic_batch(seed, vocab, batch, seq_len, position):
    rng = CounterRng(seed, STREAM_DATA)
    seqs = (position + np.arange(batch)) % 1000
    idx = seqs[:, None].astype(np.uint64) * np.uint64(seq_len + 1) + np.arange(seq_len + 1, dtype=np.uint64)[None, :]
    tok = (1 + rng.below(idx, vocab - 1)).astype(np.int64)
    return torch.tensor(tok[:, :-1]), torch.tensor(tok[:, 1:])


def flops_per_step(a, batch, seq_len):
    d = a.hidden_dim // a.num_heads
    qkv = (a.num_heads + 2 * a.num_kv_heads) * d
    matmul = a.num_layers * (a.hidden_dim * qkv + a.num_heads * d * a.hidden_dim + 3 * a.hidden_dim * a.ffn) \
        + a.vocab_size * a.hidden_dim
    return 6.0 * matmul * batch * seq_len + 6.0 * a.num_layers * batch * seq_len * seq_len * a.num_heads * d


def run_point(a, mode, precision, batch, seq_len):
    torch.manual_seed(0)
    torch.cuda.reset_peak_memory_stats()  # the peak covers the model, the capture and the graph's own memory
    dev = torch.device("cuda")
    padded_vocab = (a.vocab_size + a.vocab_multiple - 1) // a.vocab_multiple * a.vocab_multiple
    model = TinyLlama(a.vocab_size, padded_vocab, a.hidden_dim, a.num_layers, a.num_heads, a.num_kv_heads, a.ffn,
                      seq_len, a.norm_eps, a.rope_theta).to(dev)
    init_like_project(model, a.seed)
    use_graph = "graph" in mode
    opt = torch.optim.AdamW(model.parameters(), lr=a.learning_rate, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=a.weight_decay, fused=True, capturable=use_graph)
    fwd_model = torch.compile(model) if mode.startswith("compile") else model
    amp = torch.autocast("cuda", dtype=torch.bfloat16, enabled=precision == "bf16")
    tokens = torch.empty(batch, seq_len, dtype=torch.long, device=dev)
    targets = torch.empty_like(tokens)
    position = [0]

    def next_batch():
        t, y = synthetic_batch(a.seed, a.vocab_size, batch, seq_len, position[0])
        position[0] += batch
        tokens.copy_(t, non_blocking=False)
        targets.copy_(y, non_blocking=False)

    ev = [torch.cuda.Event(enable_timing=True) for _ in range(4)]

    def step(timed):
        if timed: ev[0].record()
        with amp:
            loss = fwd_model(tokens, targets)
        if timed: ev[1].record()
        loss.backward()
        if timed: ev[2].record()
        opt.step()
        if timed: ev[3].record()
        return loss

    graph, static_loss = None, None
    if use_graph:  # warm up on a side stream, then capture the whole step (PyTorch's whole-network recipe)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                next_batch()
                opt.zero_grad(set_to_none=True)
                step(False)
        torch.cuda.current_stream().wait_stream(s)
        opt.zero_grad(set_to_none=True)  # the replays write the gradients into the graph's own memory
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_loss = step(False)

    ms, fwd, bwd, optim, losses = [], [], [], [], []
    total = a.warmup + a.steps * a.repeats
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for i in range(total):
        next_batch()
        if use_graph:
            start.record()
            graph.replay()
            end.record()
            end.synchronize()
            losses.append(static_loss.item())
            if i >= a.warmup: ms.append(start.elapsed_time(end))
        else:
            opt.zero_grad(set_to_none=True)
            loss = step(True)
            ev[3].synchronize()
            losses.append(loss.item())
            if i >= a.warmup:
                ms.append(ev[0].elapsed_time(ev[3]))
                fwd.append(ev[0].elapsed_time(ev[1]))
                bwd.append(ev[1].elapsed_time(ev[2]))
                optim.append(ev[2].elapsed_time(ev[3]))
    reps = [statistics.fmean(ms[r * a.steps:(r + 1) * a.steps]) for r in range(a.repeats)]
    med = statistics.median(reps)
    flops = flops_per_step(a, batch, seq_len)
    peak = {"fp32": 66.9e12, "bf16": 989.4e12}[precision] if "H100" in torch.cuda.get_device_name() or \
        "H200" in torch.cuda.get_device_name() else 0
    split = lambda xs: statistics.median(xs) if xs else None
    return {"version": "pytorch-" + mode, "batch_size": batch, "seq_len": seq_len, "precision": precision,
            "plan": f"PyTorch {torch.__version__} {mode}", "status": "ok", "ms_median": med, "ms_min": min(reps),
            "ms_max": max(reps), "spread": (max(reps) - min(reps)) / med, "forward_ms": split(fwd),
            "backward_ms": split(bwd), "optimizer_ms": split(optim), "samples_per_sec": batch / (med / 1e3),
            "tokens_per_sec": batch * seq_len / (med / 1e3), "tflops": flops / (med / 1e3) / 1e12,
            "mfu": flops / (med / 1e3) / peak if peak else 0, "loss": losses[-1], "first_loss": losses[0],
            "peak_bytes": torch.cuda.max_memory_allocated()}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", choices=sorted(PRESETS), help="a named model and batch; explicit flags override it")
    p.add_argument("--vocab-multiple", type=int, default=128, help="pad the output head's rows to a multiple of this")
    p.add_argument("--modes", default="eager,compile,graph,compile+graph")
    p.add_argument("--precisions", default="fp32,bf16")
    p.add_argument("--batch-sizes", default="8")
    p.add_argument("--seq-lens", default="128")
    p.add_argument("--vocab-size", type=int, default=1000)
    p.add_argument("--hidden-dim", type=int, default=512)
    p.add_argument("--num-layers", type=int, default=8)
    p.add_argument("--num-heads", type=int, default=8)
    p.add_argument("--num-kv-heads", type=int, default=None)
    p.add_argument("--intermediate-size", dest="ffn", type=int, default=None)
    p.add_argument("--norm-eps", type=float, default=1e-5)
    p.add_argument("--rope-theta", type=float, default=10000.0)
    p.add_argument("--learning-rate", type=float, default=3e-4)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--warmup-steps", dest="warmup", type=int, default=5)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--json")
    a = p.parse_args()
    if a.preset:  # what the user did not give explicitly
        given = {arg.split("=")[0] for arg in sys.argv[1:] if arg.startswith("--")}
        flag = {"ffn": "--intermediate-size"}
        set_here = []
        for key, value in PRESETS[a.preset].items():
            name = flag.get(key, "--" + key.replace("_", "-"))
            if name not in given:
                setattr(a, key, value)
                set_here.append(f"{name} {value}")
        print(f"Preset {a.preset}: {' '.join(set_here) or 'nothing (every value given explicitly)'}", flush=True)
    a.num_kv_heads = a.num_kv_heads or (a.num_heads // 2 if a.num_heads % 2 == 0 else a.num_heads)
    a.ffn = a.ffn or 4 * a.hidden_dim
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    points = []
    for mode in a.modes.split(","):
        for precision in a.precisions.split(","):
            for batch in map(int, a.batch_sizes.split(",")):
                for seq_len in map(int, a.seq_lens.split(",")):
                    t0 = time.time()
                    try:
                        pt = run_point(a, mode, precision, batch, seq_len)
                    except torch.OutOfMemoryError:
                        pt = {"version": "pytorch-" + mode, "batch_size": batch, "seq_len": seq_len,
                              "precision": precision, "status": "out of GPU memory"}
                    torch.cuda.empty_cache()
                    points.append(pt)
                    if pt["status"] == "ok":
                        print(f"{pt['version']:<24}{precision:<6}{batch:>6}{seq_len:>7}{pt['ms_median']:>9.3f} ms"
                              f"{pt['samples_per_sec']:>9.0f} samples/s  loss {pt['first_loss']:.4f} -> {pt['loss']:.4f}"
                              f"  peak {pt['peak_bytes'] / 1e6:.0f} MB  ({time.time() - t0:.0f} s)", flush=True)
                    else:
                        print(f"{pt['version']:<24}{precision:<6}{batch:>6}{seq_len:>7}  {pt['status']}", flush=True)
    env = {"name": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda_runtime": torch.version.cuda}
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"environment": env, "points": points}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
