#!/usr/bin/env python3
"""Interop: TensorBoard's own reader opens the trainer's event files.

Trains lenet for 2 epochs at N=2 on synthetic data with --tensorboard-dir and
--metrics-file, then loads the directory with tensorboard's EventAccumulator
(which checks every record's CRCs and stops at a damaged one) and checks:
one train/loss_rank0, train/lr and train/grad_norm point per step (steps
1..N, the learning rate as scheduled; the run clips gradients), the per-epoch
scalars equal to the metrics file's values (to float32 rounding) at each
epoch's last step, train/clipped_steps equal to its grad_clip records, and that a second run into
the same directory adds a file instead of replacing the first. Exit 77
(ctest: skipped) when tensorboard is not importable.
usage: tensorboard_reads_events.py TRAINER
"""
import json, os, subprocess, sys, tempfile

try:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
except ImportError as e:
    print(f"skipped: {e} (scripts/setup.sh installs tensorboard)")
    sys.exit(77)

trainer = sys.argv[1]
EPOCHS, SAMPLES, BATCH = 2, 320, 32
STEPS = EPOCHS * SAMPLES // BATCH


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def train(tb, metrics):
    cmd = ["mpirun", "-np", "2", trainer, "--model", "lenet", "--dataset", "synthetic",
           "--synthetic-samples", str(SAMPLES), "--global-batch-size", str(BATCH), "--epochs", str(EPOCHS),
           "--lr", "0.02", "--warmup-epochs", "1", "--progress", "off", "--tensorboard-dir", tb,
           "--metrics-file", metrics, "--clip-grad-norm", "0.5"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"trainer exited {r.returncode}:\n{r.stdout}\n{r.stderr}")


with tempfile.TemporaryDirectory() as work:
    tb, metrics = os.path.join(work, "tb"), os.path.join(work, "metrics.jsonl")
    train(tb, metrics)
    files = sorted(os.listdir(tb))
    if len(files) != 1 or not files[0].startswith("events.out.tfevents."):
        fail(f"expected one event file, found {files}")
    ea = EventAccumulator(tb, size_guidance={"scalars": 0})  # 0: keep every point
    ea.Reload()
    tags = set(ea.Tags()["scalars"])
    want = {"train/loss_rank0", "train/lr", "train/grad_norm", "train/clipped_steps", "epoch/train_loss", "epoch/train_accuracy", "epoch/test_loss",
            "epoch/test_accuracy", "epoch/images_per_sec", "epoch/seconds"}
    if not want <= tags:
        fail(f"missing tags {sorted(want - tags)} (have {sorted(tags)})")

    loss = ea.Scalars("train/loss_rank0")
    if [e.step for e in loss] != list(range(1, STEPS + 1)):
        fail(f"train/loss_rank0 at steps {[e.step for e in loss]}, expected 1..{STEPS}")
    if not all(0 < e.value < 10 for e in loss):
        fail(f"train/loss_rank0 values out of range: {[e.value for e in loss]}")
    lr = [e.value for e in ea.Scalars("train/lr")]
    # warmup over the first epoch: rising to 0.02, then held
    if not (lr[0] < lr[STEPS // EPOCHS - 1] and abs(lr[-1] - 0.02) < 1e-6):
        fail(f"train/lr does not follow the warmup: {lr}")

    norms = ea.Scalars("train/grad_norm")
    if [e.step for e in norms] != list(range(1, STEPS + 1)) or not all(0 < e.value < 1e6 for e in norms):
        fail(f"train/grad_norm points {[(e.step, e.value) for e in norms]}, expected one positive value per step")

    records = [json.loads(l) for l in open(metrics)]
    clips = [(r["step"], r["clipped_steps"]) for r in records if r["type"] == "grad_clip"]
    got = [(e.step, e.value) for e in ea.Scalars("train/clipped_steps")]
    if len(clips) != EPOCHS or got != clips:
        fail(f"train/clipped_steps {got} differs from the metrics file's grad_clip records {clips}")

    epochs = [json.loads(l) for l in open(metrics) if json.loads(l)["type"] == "epoch"]
    if len(epochs) != EPOCHS:
        fail(f"{len(epochs)} epoch records in the metrics file")
    pairs = {"epoch/train_loss": "train_loss", "epoch/train_accuracy": "train_acc", "epoch/test_loss": "test_loss",
             "epoch/test_accuracy": "test_acc", "epoch/images_per_sec": "images_per_sec", "epoch/seconds": "seconds"}
    for tag, key in pairs.items():
        got = [(e.step, e.value) for e in ea.Scalars(tag)]
        exp = [(m["step"], m[key]) for m in epochs]
        if len(got) != len(exp) or any(gs != es or abs(gv - ev) > 1e-6 * max(1.0, abs(ev))
                                       for (gs, gv), (es, ev) in zip(got, exp)):
            fail(f"{tag} {got} differs from the metrics file's {key} {exp}")

    train(tb, metrics)  # a second run: a new file beside the first
    files = sorted(os.listdir(tb))
    if len(files) != 2:
        fail(f"a second run into the directory left {files}")
    print(f"ok: TensorBoard read {STEPS} step points and {EPOCHS} epochs of {len(tags)} tags; "
          f"epoch/test_accuracy {[round(e.value, 4) for e in ea.Scalars('epoch/test_accuracy')]}")
