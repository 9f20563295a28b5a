#!/usr/bin/env python3
"""Interop: lockstep's gpt2-tiny computes what a PyTorch GPT-2 computes.

PyTorch makes random weights (every parameter, biases and LayerNorms too) and
a random batch, and writes the weights as Hugging Face's files hold them: as
GPT2LMHeadModel's state_dict (the "transformer." prefix, lm_head.weight, BOOL
causal masks, masked_bias) and as the hub's gpt2 file (no prefix, no lm_head,
F32 masks). lockstep (the gpt2_grads tool) loads each, runs forward, the mean
cross-entropy and backward; the reference runs in float64. Checked:
  logits and every parameter gradient: max |ours - ref| / max |ref| <= RTOL
  loss: |ours - ref| <= RTOL * ref
  the two files: bitwise the same logits and gradients
RTOL is 1e-5 for fp32: the largest errors measured are 5.9e-7 (logits),
1.1e-6 (gradients) and 2.2e-9 (loss), at both sizes.
Sizes: vocabulary 512, 2 layers, 4 heads, 64 channels, T 32, B 4; then the
real gpt2-tiny (50,257 tokens, 4 x 4 x 256, T 64, B 2). Exit 77 (ctest:
skipped) without torch or safetensors.
usage: gpt2_matches_torch.py GPT2_GRADS
"""
import copy, os, subprocess, sys, tempfile

try:
    import torch
    import torch.nn.functional as F
    from safetensors.torch import load_file, save_file
except ImportError as e:
    print(f"skipped: {e} (scripts/setup.sh installs torch and safetensors)")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt2_reference import GPT2, hf_file_state, randomize  # noqa: E402

RTOL = 1e-5
CONTEXT = 256  # gpt2-tiny's
CASES = [(512, 2, 4, 64, 32, 4), (50257, 4, 4, 256, 64, 2)]  # vocab, layers, heads, channels, T, B


def rel(ours, ref):
    return ((ours.double() - ref).abs().max() / ref.abs().max()).item()


def run_case(tool, work, vocab, n_layer, n_head, c, t, b, seed):
    model = GPT2(vocab, CONTEXT, n_layer, n_head, c)
    randomize(model, seed)
    g = torch.Generator().manual_seed(seed + 1)
    tokens, targets = (torch.randint(vocab, (b, t), generator=g) for _ in range(2))
    batch = os.path.join(work, "batch.safetensors")
    save_file({"tokens": tokens.int(), "targets": targets.int()}, batch)
    outs = []
    for form in ("lm", "bare"):
        w, out = os.path.join(work, f"{form}.safetensors"), os.path.join(work, f"{form}-out.safetensors")
        save_file(hf_file_state(model, bare=form == "bare"), w)
        subprocess.run([tool, w, batch, out, "--vocab", str(vocab), "--n-layer", str(n_layer), "--n-head",
                        str(n_head), "--n-embd", str(c)], check=True, stdout=subprocess.DEVNULL)
        outs.append(load_file(out))
    ours, bare = outs
    same = ours.keys() == bare.keys() and all(torch.equal(ours[k], bare[k]) for k in ours)

    ref = copy.deepcopy(model).double()
    logits = ref(tokens)
    loss = F.cross_entropy(logits.view(-1, vocab), targets.view(-1))
    loss.backward()
    errors = {"logits": rel(ours["logits"], logits.detach())}
    for name, p in ref.named_parameters():
        errors[name] = rel(ours[name], p.grad) if name in ours else float("inf")
    loss_err = abs(ours["loss"].item() - loss.item()) / loss.item()
    extra = sorted(set(ours) - set(errors) - {"loss"})
    worst = max((k for k in errors if k != "logits"), key=errors.get)
    ok = same and not extra and loss_err <= RTOL and max(errors.values()) <= RTOL
    print(f"{'ok  ' if ok else 'FAIL'} vocab {vocab}, {n_layer}x{n_head}x{c}, T {t}, B {b}: "
          f"loss {loss.item():.6f} (rel diff {loss_err:.2e}), logits rel diff {errors['logits']:.2e}, "
          f"gradients max rel diff {errors[worst]:.2e} ({worst}), both file forms bitwise equal: {same}"
          + (f", unexpected tensors {extra}" if extra else ""))
    if not ok:
        for k, v in errors.items():
            print(f"    {k}: {v:.3e}")
    return ok


def main():
    tool = sys.argv[1]
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as work:
        results = [run_case(tool, work, *case, seed=7 + i) for i, case in enumerate(CASES)]
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
