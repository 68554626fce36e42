#!/usr/bin/env python3
"""The training recipe of `tiny_llama train` in PyTorch, for a long run to compare against.

  python3 tools/pytorch_train.py --data 'tokens/*.bin' --vocab-size 8000 --num-steps 2000 ... --json run.json

The model, its initial weights (the project's counter-based random numbers) and the step are
tools/pytorch_reference.py's; this script adds what a run around the step needs, each as the
project computes it, so that both train on the same tokens in the same order from the same
weights:
  data        token files (llm.c's format); files with "val" in the name validate; windows of
              T+1 tokens stepping by T within each file; --shuffle visits them in the order of
              the project's permutation (src/core/rng.h, permuted_index), anew each pass;
  schedule    linear warmup, then constant, cosine, linear or wsd (src/train/schedule.cpp);
  step        --grad-accum-steps micro-batches of --batch-size, clip_grad_norm_ (--grad-clip),
              fused AdamW with the norms and the embedding in a group without decay on request;
  validation  the mean loss over the first ceil(--val-tokens / T) validation windows, at step 0,
              every --eval-every steps and at the end.
Writes the per-step losses and the validation losses as JSON (--json), in the shape of
`tiny_llama --json` (steps, validation), which tools/plot_loss.py reads.
"""
import argparse
import glob
import json
import math
import os
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
    sys.exit(f"pytorch_train.py needs PyTorch and numpy ({missing}): it runs on a GPU machine that has them")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_reference import TinyLlama, init_like_project, mix64  # noqa: E402

STREAM_SHUFFLE = 0x5A0FF1E
MASK64 = (1 << 64) - 1


def read_tokens(path):
    """A token file: 256 int32 of header (magic, version, count), then the tokens: uint16 for
    magic 20240520 version 1, uint32 for its version 2 and for llm.c's 20240801 version 7."""
    header = np.fromfile(path, dtype=np.int32, count=256)
    if header[0] not in (20240520, 20240801):
        sys.exit(f"{path}: not a token file")
    dtype = np.uint16 if header[0] == 20240520 and header[1] == 1 else np.uint32
    return np.fromfile(path, dtype=dtype, offset=1024, count=int(header[2])).astype(np.int64)


class Windows:
    """The windows of T+1 tokens, stepping by T, within each file of a split, in file order."""

    def __init__(self, files, T):
        self.T, self.files, self.first = T, [read_tokens(f) for f in files], []
        n = 0
        for t in self.files:
            self.first.append(n)
            n += max(0, (len(t) - 1) // T)
        self.count = n

    def window(self, w):
        f = max(i for i, first in enumerate(self.first) if first <= w and len(self.files[i]) > self.T)
        start = (w - self.first[f]) * self.T
        return self.files[f][start:start + self.T + 1]


def bits(key, i):
    return int(mix64(np.uint64((key + i) & MASK64)))


def permuted_index(i, n, key, epoch):
    """src/core/rng.h's four-round Feistel permutation of [0, n), walked until it lands below n."""
    b = 2
    while b < 64 and (1 << b) < n:
        b += 2
    half = b // 2
    mask = (1 << half) - 1
    while True:
        left, right = i >> half, i & mask
        for rnd in range(4):
            nxt = left ^ (bits(key, (int(mix64(np.uint64(((epoch << 2) | rnd) & MASK64))) + right) & MASK64) & mask)
            left, right = right, nxt
        i = (left << half) | right
        if i < n:
            return i


def lr_at(a, step):
    total = a.lr_schedule_steps or a.num_steps
    if step <= a.lr_warmup_steps:
        return a.learning_rate * step / a.lr_warmup_steps
    if a.lr_schedule == "constant":
        return a.learning_rate
    decay = (a.lr_decay_steps or total // 5) if a.lr_schedule == "wsd" else total - a.lr_warmup_steps
    start = total - decay
    if step <= start or decay <= 0:
        return a.learning_rate
    p = min(1.0, (step - start) / decay)
    if a.lr_schedule == "cosine":
        return a.min_lr + 0.5 * (1.0 + math.cos(math.pi * p)) * (a.learning_rate - a.min_lr)
    return a.learning_rate - p * (a.learning_rate - a.min_lr)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True, help="a quoted glob of token files")
    p.add_argument("--vocab-size", type=int, required=True)
    p.add_argument("--hidden-dim", type=int, default=512)
    p.add_argument("--num-layers", type=int, default=8)
    p.add_argument("--num-heads", type=int, default=8)
    p.add_argument("--num-kv-heads", type=int, default=None)
    p.add_argument("--intermediate-size", dest="ffn", type=int, default=None)
    p.add_argument("--norm-eps", type=float, default=1e-5)
    p.add_argument("--rope-theta", type=float, default=10000.0)
    p.add_argument("--vocab-multiple", type=int, default=128)
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--grad-accum-steps", type=int, default=1)
    p.add_argument("--num-steps", type=int, default=50)
    p.add_argument("--learning-rate", type=float, default=3e-4)
    p.add_argument("--lr-schedule", default="constant", choices=["constant", "cosine", "linear", "wsd"])
    p.add_argument("--lr-warmup-steps", type=int, default=0)
    p.add_argument("--lr-decay-steps", type=int, default=0)
    p.add_argument("--lr-schedule-steps", type=int, default=0)
    p.add_argument("--min-lr", type=float, default=0.0)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--beta1", type=float, default=0.9)
    p.add_argument("--beta2", type=float, default=0.999)
    p.add_argument("--adam-eps", type=float, default=1e-8)
    p.add_argument("--grad-clip", type=float, default=0.0)
    p.add_argument("--no-decay-norms", action="store_true")
    p.add_argument("--no-decay-embedding", action="store_true")
    p.add_argument("--shuffle", action="store_true")
    p.add_argument("--seed", type=int, default=42, help="the initial weights and the shuffle")
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--val-tokens", type=int, required=True)
    p.add_argument("--precision", default="bf16", choices=["bf16", "fp32"])
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument("--log-every", type=int, default=100)
    p.add_argument("--json")
    a = p.parse_args()
    a.num_kv_heads = a.num_kv_heads or (a.num_heads // 2 if a.num_heads % 2 == 0 else a.num_heads)
    a.ffn = a.ffn or 4 * a.hidden_dim
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    dev = torch.device("cuda")

    files = sorted(glob.glob(a.data))
    val_files = [f for f in files if "val" in os.path.basename(f)]
    train = Windows([f for f in files if f not in val_files], a.seq_len)
    val = Windows(val_files, a.seq_len)
    val_windows = (a.val_tokens + a.seq_len - 1) // a.seq_len
    if not val_files or val_windows > val.count:
        sys.exit("--val-tokens: more windows than the validation files hold (or none)")
    key = int(mix64(np.uint64(a.seed) ^ mix64(np.uint64(STREAM_SHUFFLE))))

    padded = (a.vocab_size + a.vocab_multiple - 1) // a.vocab_multiple * a.vocab_multiple
    model = TinyLlama(a.vocab_size, padded, a.hidden_dim, a.num_layers, a.num_heads, a.num_kv_heads, a.ffn, a.seq_len,
                      a.norm_eps, a.rope_theta).to(dev)
    init_like_project(model, a.seed)
    exempt = set()
    for name, q in model.named_parameters():
        if (q.dim() == 1 and a.no_decay_norms) or (name == "embed.weight" and a.no_decay_embedding):
            exempt.add(name)
    groups = [{"params": [q for n, q in model.named_parameters() if n not in exempt], "weight_decay": a.weight_decay},
              {"params": [q for n, q in model.named_parameters() if n in exempt], "weight_decay": 0.0}]
    opt = torch.optim.AdamW([g for g in groups if g["params"]], lr=a.learning_rate, betas=(a.beta1, a.beta2),
                            eps=a.adam_eps, fused=True)
    fwd = torch.compile(model) if a.compile else model
    amp = torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.precision == "bf16")

    def batch_of(windows, ids):
        w = torch.tensor(np.stack([windows.window(int(i)) for i in ids]), device=dev)
        return w[:, :-1].contiguous(), w[:, 1:].contiguous()

    def validation_loss():
        model.eval()
        total = 0.0
        with torch.no_grad(), amp:
            for first in range(0, val_windows, a.batch_size):
                tok, tgt = batch_of(val, range(first, min(val_windows, first + a.batch_size)))
                total += float(fwd(tok, tgt)) * tok.numel()  # the mean over the batch's tokens, summed back
        model.train()
        return total / (val_windows * a.seq_len)

    steps, validation = [], [{"step": 0, "loss": validation_loss()}]
    print(f"Validation loss at step 0: {validation[0]['loss']:.4f}", flush=True)
    rows = a.batch_size * a.grad_accum_steps
    position, epoch, t0 = 0, 0, time.time()
    for step in range(1, a.num_steps + 1):
        ids = []
        for r in range(rows):  # the loader's global positions, permuted per pass with --shuffle
            at = position + r
            w = at % train.count
            ids.append(permuted_index(w, train.count, key, epoch + at // train.count) if a.shuffle else w)
        epoch += (position + rows) // train.count
        position = (position + rows) % train.count
        lr = lr_at(a, step)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.zero_grad(set_to_none=True)
        loss_sum = 0.0
        for i in range(a.grad_accum_steps):
            tok, tgt = batch_of(train, ids[i * a.batch_size:(i + 1) * a.batch_size])
            with amp:
                loss = fwd(tok, tgt)
            (loss / a.grad_accum_steps).backward()
            loss_sum += float(loss)
        norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), a.grad_clip)) if a.grad_clip > 0 else None
        opt.step()
        steps.append({"step": step, "loss": loss_sum / a.grad_accum_steps, "lr": lr, "grad_norm": norm})
        eval_step = step % a.eval_every == 0 or step == a.num_steps
        if eval_step:
            validation.append({"step": step, "loss": validation_loss()})
        if step % a.log_every == 0 or step == a.num_steps:
            print(f"Step {step}/{a.num_steps} | Loss: {steps[-1]['loss']:.4f} | LR: {lr:.3e}"
                  + (f" | Norm: {norm:.3f}" if norm is not None else "")
                  + (f" | Val: {validation[-1]['loss']:.4f}" if eval_step else "")
                  + f" | {time.time() - t0:.0f}s", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"framework": f"PyTorch {torch.__version__}", "device": torch.cuda.get_device_name(),
                       "args": vars(a), "steps": steps, "validation": validation}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
