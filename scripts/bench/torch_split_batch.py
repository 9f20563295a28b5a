#!/usr/bin/env python3
"""What splitting a global batch over N ranks does to fp32 training in PyTorch:
the floor any data-parallel framework's N-rank weights sit above.

The same GPT-2 (tests/interop/gpt2_reference.py, GPT-2's initialisation from
one seed) trains --steps steps twice on the same batches (the first windows of
--shard, an llm.c token shard, in order; random tokens without it): once on the whole global
batch per step (N = 1), once as N equal parts whose mean gradients are averaged
in a pairwise tree, as an allreduce over N ranks adds them (DDP's N ranks, in
one process). Prints, per optimizer, the largest difference relative to each
tensor's largest magnitude (what tests/tools/compare_weights reports) and the
tensor where it is, with the key third of each QKV bias apart (as
tests/trainer/compare_gpt2.py reports it).

usage: /usr/bin/python3 scripts/bench/torch_split_batch.py [--ranks 4] [--steps 20]
         [--optimizers adamw,sgd] [--vocab 50257] [--seq-len 64] [--batch 8]
         [--layers 4] [--heads 4] [--channels 256] [--lr 1e-3] [--sgd-lr 0.05] [--eps 1e-8]
         [--shard FILE] [--threads 1]
AdamW: betas 0.9/0.95, weight decay 0.1 on every tensor; SGD: momentum 0.9.
"""
import argparse
import copy
import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "interop"))
from gpt2_reference import GPT2, token_windows  # noqa: E402


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--optimizers", default="adamw,sgd")
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--channels", type=int, default=256)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--sgd-lr", type=float, default=0.05)
    p.add_argument("--eps", type=float, default=1e-8)
    p.add_argument("--shard", default="")
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    if a.ranks < 1 or a.batch % a.ranks:
        p.error(f"--batch {a.batch} does not split into --ranks {a.ranks} equal parts")
    return a


def gpt2_init(model, n_layer, seed):
    """GPT-2's: normal 0.02, residual projections 0.02 / sqrt(2 L), biases 0, LayerNorms 1 and 0."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".ln_" in name:
                p.fill_(1.0 if name.endswith(".weight") else 0.0)
            elif name.endswith(".bias"):
                p.zero_()
            else:
                std = 0.02 / (2 * n_layer) ** 0.5 if name.endswith("c_proj.weight") else 0.02
                p.copy_(std * torch.randn(p.shape, generator=g))


def tree_sum(grads):
    """Pairwise sums, as recursive halving adds the ranks' contributions."""
    while len(grads) > 1:
        grads = [grads[i] + grads[i + 1] if i + 1 < len(grads) else grads[i] for i in range(0, len(grads), 2)]
    return grads[0]


def train(model, opt_name, args, batches, ranks):
    model = copy.deepcopy(model)
    params = list(model.parameters())
    if opt_name == "adamw":
        opt = torch.optim.AdamW(params, lr=args.lr, betas=(0.9, 0.95), eps=args.eps, weight_decay=0.1)
    else:
        opt = torch.optim.SGD(params, lr=args.sgd_lr, momentum=0.9)
    for x, y in batches:
        parts = []
        for xs, ys in zip(x.chunk(ranks), y.chunk(ranks)):
            model.zero_grad(set_to_none=True)
            logits = model(xs)
            F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ys.reshape(-1)).backward()
            parts.append([p.grad.clone() for p in params])
        for i, p in enumerate(params):
            p.grad = tree_sum([part[i] for part in parts]) / ranks
        opt.step()
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def compare(a, b):
    """(worst, tensor) over everything but the key third of each QKV bias, and (worst, tensor) over those thirds:
    a key bias's exact gradient is zero (softmax ignores a constant added to a row's scores), so it moves by
    rounding alone."""
    rest, key = (0.0, ""), (0.0, "")
    for n in a:
        scale = a[n].abs().max().item()
        diff = (a[n] - b[n]).abs()
        if n.endswith("attn.c_attn.bias"):
            c = diff.numel() // 3
            k_rel = diff[c:2 * c].max().item() / (scale if scale > 0 else 1.0)
            key = max(key, (k_rel, n))
            diff = torch.cat([diff[:c], diff[2 * c:]])
        rest = max(rest, (diff.max().item() / (scale if scale > 0 else 1.0), n))
    return rest, key


def main():
    args = parse()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = GPT2(args.vocab, args.seq_len, args.layers, args.heads, args.channels)
    gpt2_init(model, args.layers, 1)
    batches = []
    if args.shard:
        try:
            with open(args.shard, "rb") as f:
                header = np.frombuffer(f.read(1024), dtype=np.int32)
                ok = len(header) == 256 and header[0] == 20240520 and header[1] == 1
                tokens = np.frombuffer(f.read(2 * int(header[2])), dtype=np.uint16) if ok else None
        except OSError as e:
            sys.exit(f"torch_split_batch.py: --shard {args.shard}: {e.strerror}")
        if tokens is None or len(tokens) != header[2]:
            sys.exit(f"torch_split_batch.py: --shard {args.shard}: not an llm.c token shard (magic 20240520, "
                     "version 1, then its token count of uint16 tokens)")
        x, y = token_windows(tokens, args.seq_len)
        need = args.steps * args.batch
        if len(x) < need:
            sys.exit(f"torch_split_batch.py: --shard {args.shard}: {len(x)} windows of {args.seq_len}, {need} needed")
        batches = [(x[i:i + args.batch], y[i:i + args.batch]) for i in range(0, need, args.batch)]
    else:
        g = torch.Generator().manual_seed(2)
        for _ in range(args.steps):
            tok = torch.randint(0, args.vocab, (args.batch, args.seq_len + 1), generator=g)
            batches.append((tok[:, :-1], tok[:, 1:]))
    out = {"ranks": args.ranks, "steps": args.steps, "vocab": args.vocab, "seq_len": args.seq_len,
           "batch": args.batch, "layers": args.layers, "channels": args.channels, "results": {}}
    for opt_name in args.optimizers.split(","):
        whole = train(model, opt_name, args, batches, 1)
        split = train(model, opt_name, args, batches, args.ranks)
        (worst, where), (key, key_where) = compare(whole, split)
        print(f"{opt_name}: N=1 vs N={args.ranks} after {args.steps} steps: max rel diff {worst:.3e} ({where}), "
              f"key bias {key:.3e} ({key_where})")
        out["results"][opt_name] = {"max_rel_diff": worst, "tensor": where, "key_bias_rel_diff": key}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
