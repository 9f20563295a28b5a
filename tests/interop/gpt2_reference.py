"""A minimal GPT-2 in PyTorch, named and laid out as Hugging Face's
GPT2LMHeadModel (without the `transformers` package), and what the GPT-2
interop tests share: random weights, Hugging Face-style weights files, llm.c
token shards and windows.

Conv1D weights are [in, out] (y = x W + b), GELU is the tanh approximation,
LayerNorm eps 1e-5, attention causal, the logits tied to transformer.wte. The
causal mask is a non-persistent buffer, so state_dict() holds exactly the
parameters, as lockstep's weights files do.
"""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Conv1D(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(n_in, n_out))
        self.bias = nn.Parameter(torch.zeros(n_out))

    def forward(self, x):
        return x @ self.weight + self.bias


class Attention(nn.Module):
    def __init__(self, c, n_head, context):
        super().__init__()
        self.n_head = n_head
        self.c_attn, self.c_proj = Conv1D(c, 3 * c), Conv1D(c, c)
        self.register_buffer("bias", torch.tril(torch.ones(context, context, dtype=torch.bool)), persistent=False)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in self.c_attn(x).split(c, 2))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.n_head)
        att = att.masked_fill(~self.bias[:t, :t], float("-inf")).softmax(-1)
        return self.c_proj((att @ v).transpose(1, 2).reshape(b, t, c))


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_fc, self.c_proj = Conv1D(c, 4 * c), Conv1D(4 * c, c)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, c, n_head, context):
        super().__init__()
        self.ln_1, self.attn = nn.LayerNorm(c, eps=1e-5), Attention(c, n_head, context)
        self.ln_2, self.mlp = nn.LayerNorm(c, eps=1e-5), MLP(c)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Transformer(nn.Module):
    def __init__(self, vocab, context, n_layer, n_head, c):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, c), nn.Embedding(context, c)
        self.h = nn.ModuleList(Block(c, n_head, context) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(c, eps=1e-5)


class GPT2(nn.Module):
    """tokens [B, T] int64 -> logits [B, T, vocab]"""

    def __init__(self, vocab, context, n_layer, n_head, c):
        super().__init__()
        self.transformer = Transformer(vocab, context, n_layer, n_head, c)

    def forward(self, idx):
        tr = self.transformer
        x = tr.wte(idx) + tr.wpe(torch.arange(idx.shape[1]))
        for block in tr.h:
            x = block(x)
        return tr.ln_f(x) @ tr.wte.weight.t()


def randomize(model, seed, std=0.05):
    """Every parameter random (biases and LayerNorms too, so each gradient is exercised)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            base = 1.0 if ".ln_" in name and name.endswith(".weight") else 0.0  # LayerNorm scales about 1
            p.copy_(base + std * torch.randn(p.shape, generator=g, dtype=torch.float64))


def hf_file_state(model, bare=False):
    """The state as Hugging Face's files hold it: GPT2LMHeadModel's (with lm_head.weight, bool causal masks and
    masked_bias), or with `bare` the hub's gpt2 file (no "transformer." prefix, no lm_head, F32 masks)."""
    sd = {k: v.detach().float().contiguous() for k, v in model.state_dict().items()}
    context = model.transformer.wpe.weight.shape[0]
    mask = torch.tril(torch.ones(context, context, dtype=torch.bool)).view(1, 1, context, context)
    for l in range(len(model.transformer.h)):
        sd[f"transformer.h.{l}.attn.bias"] = mask.float() if bare else mask.clone()
        sd[f"transformer.h.{l}.attn.masked_bias"] = torch.tensor(-1e4)
    if bare:
        return {k[len("transformer."):]: v for k, v in sd.items()}
    sd["lm_head.weight"] = sd["transformer.wte.weight"].clone()
    return sd


def write_token_shard(path, tokens):
    """llm.c's shard: 256 int32 of header (magic, version, count), then uint16 tokens."""
    header = np.zeros(256, dtype=np.int32)
    header[:3] = [20240520, 1, len(tokens)]
    with open(path, "wb") as f:
        f.write(header.tobytes() + np.asarray(tokens, dtype=np.uint16).tobytes())


def token_windows(tokens, t):
    """llm.c's windows of one shard: inputs tokens[i*T : i*T+T], targets shifted by one, i < (n - 1) // T."""
    tokens = torch.as_tensor(np.asarray(tokens, dtype=np.int64))
    n = (len(tokens) - 1) // t
    idx = torch.arange(n)[:, None] * t + torch.arange(t)[None, :]
    return tokens[idx], tokens[idx + 1]
