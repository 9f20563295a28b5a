#!/usr/bin/env python3
"""Interop: PyTorch loads the trainer's gpt2-tiny weights and gets its validation loss.

The trainer trains gpt2-tiny (vocabulary 500, padded to 512 rows; 2 layers,
4 heads, 64 channels; T 32) for 2 epochs of AdamW on llm.c token shards and
saves the weights (Hugging Face's names and layout). The PyTorch reference
(gpt2_reference.py) loads the file with a strict state_dict and evaluates
the validation shards' llm.c windows -- non-overlapping, per shard, the
shard's tail that fills no window dropped -- in float64. The mean loss over
every position must match the trainer's last epoch test_loss (its metrics
file) within a relative 1e-6 (the difference measured is 9e-9). Exit 77
(ctest: skipped) without torch or safetensors.
usage: torch_evaluates_gpt2.py TRAINER
"""
import json, os, subprocess, sys, tempfile

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
    from safetensors.torch import load_file
except ImportError as e:
    print(f"skipped: {e} (scripts/setup.sh installs torch and safetensors)")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt2_reference import GPT2, token_windows, write_token_shard  # noqa: E402

RTOL = 1e-6
VOCAB, N_LAYER, N_HEAD, N_EMBD, T, CONTEXT = 500, 2, 4, 64, 32, 256


def text(rng, phrase, n):
    """Tokens with something to learn: `phrase` repeated, with 10% of the tokens random."""
    tokens = np.resize(phrase, n)
    noise = rng.random(n) < 0.1
    tokens[noise] = rng.integers(0, VOCAB, noise.sum())
    return tokens


def main():
    trainer = sys.argv[1]
    torch.set_num_threads(1)
    rng = np.random.default_rng(3)
    phrase = rng.integers(0, VOCAB, 37)
    with tempfile.TemporaryDirectory() as work:
        data = os.path.join(work, "data")
        os.mkdir(data)
        write_token_shard(f"{data}/train_000.bin", text(rng, phrase, 64 * T + 1))
        # Two validation shards: 16 windows and a tail of 5 tokens, then 7 windows.
        val = [text(rng, phrase, 16 * T + 1 + 5), text(rng, phrase, 7 * T + 1)]
        for i, tokens in enumerate(val):
            write_token_shard(f"{data}/val_{i:03d}.bin", tokens)
        w, m = os.path.join(work, "gpt2.safetensors"), os.path.join(work, "gpt2.jsonl")
        subprocess.run([trainer, "--model", "gpt2-tiny", "--dataset", "tokens", "--data-dir", data, "--vocab-size",
                        str(VOCAB), "--seq-len", str(T), "--n-layer", str(N_LAYER), "--n-head", str(N_HEAD),
                        "--n-embd", str(N_EMBD), "--optimizer", "adamw", "--lr", "0.003", "--batch-size", "8",
                        "--epochs", "2", "--threads", "1", "--save-weights", w, "--metrics-file", m,
                        "--progress", "off"], check=True, stdout=subprocess.DEVNULL)
        epochs = [json.loads(l) for l in open(m) if '"epoch"' in l]
        ours = epochs[-1]
        model = GPT2(VOCAB, CONTEXT, N_LAYER, N_HEAD, N_EMBD)
        model.load_state_dict(load_file(w), strict=True)
        model.double()
        total, count = 0.0, 0
        with torch.no_grad():
            for tokens in val:
                x, y = token_windows(tokens, T)
                logits = model(x)
                total += F.cross_entropy(logits.view(-1, VOCAB), y.view(-1), reduction="sum").item()
                count += y.numel()
    loss = total / count
    diff = abs(loss - ours["test_loss"]) / loss
    ok = diff <= RTOL
    history = " -> ".join(f"{e['test_loss']:.4f}" for e in epochs)
    print(f"{'ok  ' if ok else 'FAIL'} gpt2-tiny after {ours['step']} steps (validation loss by epoch {history}): "
          f"torch validation loss {loss:.7f} over "
          f"{count} positions | lockstep {ours['test_loss']:.7f} (rel diff {diff:.2e}, tolerance {RTOL:.0e})")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
