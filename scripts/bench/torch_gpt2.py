#!/usr/bin/env python3
"""PyTorch CPU reference for lockstep's GPT-2 training-throughput benchmark.

A minimal GPT-2 equal to models/gpt2.cpp: token and position embeddings (the
token table's 50,257 rows padded to a multiple of 128, 50,304), L pre-norm
blocks (LayerNorm eps 1e-5, fused QKV Linear, causal attention, output
projection; LayerNorm, Linear C->4C, GELU tanh, Linear 4C->C), a final
LayerNorm and the output projection tied to the token table's vocabulary rows
(no bias), GPT-2's initialisation, no dropout. Attention is written out
(PyTorch 1.13 has no F.scaled_dot_product_attention): Q K^T / sqrt(D), the
causal mask, softmax, P V, each over the full T x T (lockstep's kernel skips
the masked half). AdamW, decaying matrices and embeddings, not biases and
LayerNorms (as the trainer's).

Trains on one fixed batch of synthetic random tokens (inputs and targets
uniform over the vocabulary) with the given batch, sequence length and
thread count: each step is forward, cross-entropy over B x T positions,
backward and AdamW's step. Warm-up steps are left out; prints the median
tokens/s over timed windows, then one JSON line (as torch_cpu.py).

Threads: torch.set_num_threads(N) for ATen's OpenMP loops; Debian's torch
calls OpenBLAS (libblas.so.3 -> openblas-pthread) for its matmuls, whose
thread count set_num_threads does not reach, so OPENBLAS_NUM_THREADS is set to
N before torch is imported unless the caller set it. OPENBLAS_CORETYPE is the
caller's (scripts/bench_gpt2.sh sets it to the family lockstep's trainer
runs). The JSON names what OpenBLAS reports for both.
Runs with Debian's python3-torch (1.13, CPU): /usr/bin/python3.
"""
import argparse
import ctypes
import json
import math
import os
import resource
import statistics
import sys
import time

SIZES = {"gpt2-tiny": (4, 4, 256, 256), "gpt2": (12, 12, 768, 1024), "gpt2-medium": (24, 16, 1024, 1024)}
VOCAB_ALIGN = 128


def positive(text):
    v = int(text)
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive integer")
    return v


def parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="gpt2-tiny", choices=sorted(SIZES))
    ap.add_argument("--n-layer", type=positive)
    ap.add_argument("--n-head", type=positive)
    ap.add_argument("--n-embd", type=positive)
    ap.add_argument("--vocab-size", type=positive, default=50257)
    ap.add_argument("--batch-size", type=positive, default=8)
    ap.add_argument("--seq-len", type=positive, help="tokens per sample (default: the model's context)")
    ap.add_argument("--threads", type=positive, default=1)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.95)
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    ap.add_argument("--steps", type=positive, default=20, help="timed steps")
    ap.add_argument("--window", type=positive, default=5, help="steps per timed window")
    a = ap.parse_args()
    layers, heads, channels, context = SIZES[a.model]
    a.n_layer, a.n_head, a.n_embd = a.n_layer or layers, a.n_head or heads, a.n_embd or channels
    a.context = context
    a.seq_len = a.seq_len or context
    if a.n_embd % a.n_head:
        ap.error(f"--n-head {a.n_head} does not divide --n-embd {a.n_embd}")
    if a.seq_len > context:
        ap.error(f"--seq-len {a.seq_len} is outside the model's context [1, {context}]")
    if a.steps < a.window:
        ap.error(f"--steps {a.steps} is fewer than one --window of {a.window}")
    if a.warmup < 0:
        ap.error(f"--warmup {a.warmup} is negative")
    return a


def peak_resident_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def openblas_state():
    """What the OpenBLAS torch loaded reports: kernel family and thread count."""
    try:
        lib = ctypes.CDLL("libopenblas.so.0")
        lib.openblas_get_corename.restype = ctypes.c_char_p
        return lib.openblas_get_corename().decode(), lib.openblas_get_num_threads()
    except (OSError, AttributeError):
        return "unknown", 0


def main():
    a = parse()
    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(a.threads))
    os.environ.setdefault("OMP_NUM_THREADS", str(a.threads))
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Block(nn.Module):
        def __init__(self, c, heads, proj_std):
            super().__init__()
            self.heads = heads
            self.ln_1 = nn.LayerNorm(c, eps=1e-5)
            self.qkv = nn.Linear(c, 3 * c)
            self.proj = nn.Linear(c, c)
            self.ln_2 = nn.LayerNorm(c, eps=1e-5)
            self.fc1 = nn.Linear(c, 4 * c)
            self.fc2 = nn.Linear(4 * c, c)
            for lin, std in ((self.qkv, 0.02), (self.proj, proj_std), (self.fc1, 0.02), (self.fc2, proj_std)):
                nn.init.normal_(lin.weight, 0.0, std)
                nn.init.zeros_(lin.bias)

        def attention(self, x, mask):
            b, t, c = x.shape
            d = c // self.heads
            # [B, T, 3C]: q of every head, then k, then v (models/gpt2.cpp's layout).
            q, k, v = self.qkv(x).view(b, t, 3, self.heads, d).permute(2, 0, 3, 1, 4)  # each [B, H, T, D]
            s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d))
            p = torch.softmax(s.masked_fill(mask[:t, :t], float("-inf")), dim=-1)
            return self.proj((p @ v).transpose(1, 2).reshape(b, t, c))

        def forward(self, x, mask):
            x = x + self.attention(self.ln_1(x), mask)
            return x + self.fc2(F.gelu(self.fc1(self.ln_2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            c, rows = a.n_embd, (a.vocab_size + VOCAB_ALIGN - 1) // VOCAB_ALIGN * VOCAB_ALIGN
            self.wte = nn.Parameter(torch.empty(rows, c).normal_(0.0, 0.02))
            self.wpe = nn.Parameter(torch.empty(a.context, c).normal_(0.0, 0.02))
            proj_std = 0.02 / math.sqrt(2 * a.n_layer)
            self.blocks = nn.ModuleList(Block(c, a.n_head, proj_std) for _ in range(a.n_layer))
            self.ln_f = nn.LayerNorm(c, eps=1e-5)
            # True above the diagonal: the later positions a query may not see.
            self.register_buffer("mask", torch.ones(a.context, a.context, dtype=torch.bool).triu(1))

        def forward(self, tokens):
            t = tokens.shape[1]
            x = self.wte[tokens] + self.wpe[:t]
            for blk in self.blocks:
                x = blk(x, self.mask)
            # Tied projection onto the vocabulary rows of the token table (not its padding).
            return F.linear(self.ln_f(x), self.wte[: a.vocab_size])

    import_mib = peak_resident_mib()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = GPT()
    model.train()
    params = sum(p.numel() for p in model.parameters())
    # Decay on matrices and embeddings, not on biases and LayerNorms (as the trainer's AdamW).
    groups = [{"params": [p for p in model.parameters() if p.dim() >= 2], "weight_decay": a.weight_decay},
              {"params": [p for p in model.parameters() if p.dim() < 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=a.lr, betas=(a.beta1, a.beta2), eps=a.eps)
    x = torch.randint(0, a.vocab_size, (a.batch_size, a.seq_len))
    y = torch.randint(0, a.vocab_size, (a.batch_size, a.seq_len))

    def step():
        opt.zero_grad(set_to_none=False)
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, a.vocab_size), y.view(-1))
        loss.backward()
        opt.step()
        return loss

    for _ in range(a.warmup):
        step()
    rates, tokens = [], a.batch_size * a.seq_len
    t_all = time.perf_counter()
    for _ in range(a.steps // a.window):
        t0 = time.perf_counter()
        for _ in range(a.window):
            loss = step()
        rates.append(a.window * tokens / (time.perf_counter() - t0))
    timed = (a.steps // a.window) * a.window
    ms_per_step = 1e3 * (time.perf_counter() - t_all) / timed
    med = statistics.median(rates)
    core, blas_threads = openblas_state()
    print(f"torch {torch.__version__} {a.model} ({a.n_layer} layers, {a.n_head} heads, {a.n_embd} channels, "
          f"{params / 1e6:.1f}M parameters) batch {a.batch_size} x {a.seq_len} tokens, threads {a.threads} "
          f"(OpenBLAS {core}, {blas_threads} threads): median {med:,.0f} tok/s over {len(rates)} windows of "
          f"{a.window} steps, {ms_per_step:.0f} ms per step, loss {loss.item():.3f}; "
          f"peak resident {peak_resident_mib():,.0f} MiB ({import_mib:,.0f} after importing torch)")
    print(json.dumps({"impl": "pytorch", "version": torch.__version__, "model": a.model, "n_layer": a.n_layer,
                      "n_head": a.n_head, "n_embd": a.n_embd, "parameters": params, "batch": a.batch_size,
                      "seq_len": a.seq_len, "threads": a.threads, "tokens_per_sec": med,
                      "window_tokens_per_sec": rates, "ms_per_step": ms_per_step,
                      "openblas_core": core, "openblas_threads": blas_threads,
                      "peak_resident_mib": peak_resident_mib(), "import_resident_mib": import_mib}))


if __name__ == "__main__":
    sys.exit(main())
