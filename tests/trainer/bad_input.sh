#!/usr/bin/env bash
# Bad input everywhere a user or a file can supply it, as a table: flags,
# LOCKSTEP_* variables, MNIST-format and CIFAR-10 data files, weights,
# checkpoints and lockstep-run hostfiles. Every row must exit with its code, print exactly one
# line on stderr (the tool's "error: " prefix, then text naming the input and
# what is wrong), print nothing on stdout, and leave every file under the work
# directory as it was: no metrics file, weights, timeline or checkpoint
# written, no existing one (precious.safetensors, the checkpoints) changed.
# A few positive rows at the end check what must NOT be an error.
# usage: bad_input.sh path/to/trainer path/to/lockstep-run
set -u
TRAINER=$(readlink -f "$1") RUN=$(readlink -f "$2")
WORK=$(mktemp -d)   # every input and output of the rows; compared before/after each row
SCRATCH=$(mktemp -d)  # captured output and positive runs
trap 'rm -rf "$WORK" "$SCRATCH"' EXIT
OUT=$WORK/out
mkdir -p "$OUT" "$WORK/data" "$WORK/w" "$WORK/ck" "$WORK/hosts" "$WORK/empty" "$WORK/read-only"
# Rows of tool "nobody" run as an unprivileged user (root may write anywhere):
# they can read everything and write nowhere but $OUT, as a user would.
chmod 755 "$WORK"
chmod 777 "$OUT"
chmod 555 "$WORK/read-only"
AS_USER=()
[[ $(id -u) == 0 ]] && AS_USER=(setpriv --reuid=65534 --regid=65534 --clear-groups)
echo "precious" > "$OUT/precious.safetensors"
SYN="--dataset synthetic --synthetic-samples 64 --batch-size 16"
# The rows are a machine without a GPU's (--device auto chooses the CPU, --device
# cuda is an error): a GPU machine's GPUs are hidden from them.
export CUDA_VISIBLE_DEVICES=
# Every trainer row also asks for every output file; none may appear.
OUTPUTS=(--metrics-file "$OUT/metrics.jsonl" --save-weights "$OUT/weights.safetensors" --timeline "$OUT/timeline.json")
quiet() { "$@" >"$SCRATCH/fixture.log" 2>&1 || { echo "fixture failed: $*"; cat "$SCRATCH/fixture.log"; exit 1; }; }

# --- fixtures: real weights and checkpoints from tiny synthetic runs ---------
FIX="$SYN --epochs 1 --max-steps 2 --no-eval --progress off --checkpoint-every 1 --keep-checkpoints 2"
quiet "$TRAINER" $FIX --model mlp --checkpoint-dir "$SCRATCH/ck-mlp" --save-weights "$WORK/w/mlp.safetensors"
quiet "$TRAINER" $FIX --model lenet --checkpoint-dir "$SCRATCH/ck-lenet" --save-weights "$WORK/w/lenet.safetensors"
CK1=ckpt-000000001.safetensors CK2=ckpt-000000002.safetensors

# Data sets, damaged weights and checkpoints, written byte by byte.
python3 - "$WORK" "$SCRATCH" <<'EOF' || { echo "fixture generation failed"; exit 1; }
import gzip, json, os, shutil, struct, sys
work, scratch = sys.argv[1], sys.argv[2]

def idx(path, dims, data, magic=b"\x00\x00\x08", gz=False):
    b = magic + bytes([len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + bytes(data)
    if gz: b = gzip.compress(b)
    with open(path, "wb") as f: f.write(b)

def mnist(name, n=(64, 16), hw=(28, 28), test_hw=None, labels=None, skip=()):
    d = f"{work}/data/{name}"
    os.makedirs(d, exist_ok=True)
    for split, count, (h, w) in (("train", n[0], hw), ("t10k", n[1], test_hw or hw)):
        if f"{split}-images" not in skip:
            idx(f"{d}/{split}-images-idx3-ubyte", [count, h, w], [(i * 7) % 256 for i in range(count * h * w)])
        if f"{split}-labels" not in skip:
            idx(f"{d}/{split}-labels-idx1-ubyte", [count], (labels or [i % 10 for i in range(64)])[:count])
    return d

def put(path, b):
    with open(path, "wb") as f: f.write(b)

def get(path):
    with open(path, "rb") as f: return bytearray(f.read())

mnist("good")
mnist("no-labels", skip=("train-labels",))
mnist("no-test", skip=("t10k-images",))
d = mnist("trunc-images"); b = get(f"{d}/train-images-idx3-ubyte"); put(f"{d}/train-images-idx3-ubyte", b[:-1000])
d = mnist("trunc-header"); put(f"{d}/train-labels-idx1-ubyte", b"\x00\x00\x08\x01\x00\x00")
d = mnist("empty-file"); put(f"{d}/train-images-idx3-ubyte", b"")
d = mnist("bad-magic"); b = get(f"{d}/train-images-idx3-ubyte"); b[0:2] = b"\x1f\x9c"; put(f"{d}/train-images-idx3-ubyte", b)
d = mnist("float-type"); b = get(f"{d}/train-images-idx3-ubyte"); b[2] = 0x0D; put(f"{d}/train-images-idx3-ubyte", b)
d = mnist("five-dims"); b = get(f"{d}/train-labels-idx1-ubyte"); b[3] = 5; put(f"{d}/train-labels-idx1-ubyte", b)
d = mnist("zero-dim"); idx(f"{d}/t10k-labels-idx1-ubyte", [0], [])
d = mnist("huge-dims"); idx(f"{d}/train-images-idx3-ubyte", [0xFFFFFFFF, 0xFFFFFF, 28], [])
d = mnist("trailing"); put(f"{d}/train-labels-idx1-ubyte", get(f"{d}/train-labels-idx1-ubyte") + b"\x00\x00")
d = mnist("labels-2d"); idx(f"{d}/train-labels-idx1-ubyte", [64, 1], [i % 10 for i in range(64)])
d = mnist("images-2d"); idx(f"{d}/train-images-idx3-ubyte", [64, 784], [0] * 64 * 784)
mnist("count-mismatch", n=(64, 16), labels=None)
idx(f"{work}/data/count-mismatch/train-labels-idx1-ubyte", [60], [i % 10 for i in range(60)])
mnist("label-10", labels=[i % 10 if i != 3 else 10 for i in range(64)])
mnist("label-255", labels=[255] + [i % 10 for i in range(1, 64)])
mnist("test-shape", test_hw=(14, 14))
mnist("tiny-images", hw=(4, 4))
d = mnist("corrupt-gz")
raw = get(f"{d}/train-images-idx3-ubyte"); os.remove(f"{d}/train-images-idx3-ubyte")
z = bytearray(gzip.compress(bytes(raw))); z[len(z) // 2] ^= 0xFF; z[len(z) // 2 + 1] ^= 0xFF
put(f"{d}/train-images-idx3-ubyte.gz", z)
d = mnist("cut-gz")
raw = get(f"{d}/train-labels-idx1-ubyte"); os.remove(f"{d}/train-labels-idx1-ubyte")
put(f"{d}/train-labels-idx1-ubyte.gz", gzip.compress(bytes(raw))[:30])

# safetensors
def parse(b):
    n = struct.unpack("<Q", b[:8])[0]
    return json.loads(bytes(b[8:8 + n])), bytes(b[8 + n:])

def tensors(path):
    h, data = parse(get(path))
    items = sorted((v["data_offsets"][0], k, v) for k, v in h.items() if k != "__metadata__")
    return [[k, v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]]] for _, k, v in items]

def header_bytes(h):
    j = json.dumps(h).encode()
    return j + b" " * ((8 - len(j) % 8) % 8)

def st(path, ts, meta=None, edit=None):
    h, off = {}, 0
    if meta is not None: h["__metadata__"] = meta
    for name, dt, shape, data in ts:
        h[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(data)]}
        off += len(data)
    if edit: edit(h)
    j = header_bytes(h)
    put(path, struct.pack("<Q", len(j)) + j + b"".join(t[3] for t in ts))

w = f"{work}/w"
mlp = get(f"{w}/mlp.safetensors")
T = tensors(f"{w}/mlp.safetensors")  # layers.1.weight [256,784], layers.1.bias, layers.3.weight [10,256], layers.3.bias
st(f"{scratch}/plain.safetensors", T)  # as another tool writes it: no checksums (a positive row)
put(f"{w}/truncated.safetensors", mlp[:-100])
b = bytearray(mlp); b[-3] ^= 0x10; put(f"{w}/flip-data.safetensors", b)
b = bytearray(mlp); i = b.find(b'"lockstep_model":"mlp"') + len('"lockstep_model":"ml'); b[i] ^= 0x01
put(f"{w}/flip-metadata.safetensors", b)
b = bytearray(mlp); b[8] ^= 0x01; put(f"{w}/flip-brace.safetensors", b)  # '{' -> 'z'
b = bytearray(mlp); i = b.find(b"[256,784]") + 7; b[i] ^= 0x01; put(f"{w}/flip-shape.safetensors", b)  # 784 -> 785
b = bytearray(mlp); b[6] ^= 0x01; put(f"{w}/flip-length.safetensors", b)  # header length + 2^48
t = [list(x) for x in T]; t[0][1] = "F16"; t[0][3] = t[0][3][: len(t[0][3]) // 2]; st(f"{w}/f16.safetensors", t)
t = [list(x) for x in T]; t[3][1] = "I32"; st(f"{w}/i32.safetensors", t)
t = [list(x) for x in T]; t[1][1] = "F8_E9"; st(f"{w}/unknown-dtype.safetensors", t)
t = [list(x) for x in T]; t[0][2] = [784, 256]; st(f"{w}/transposed.safetensors", t)
st(f"{w}/extra.safetensors", T + [["layers.9.weight", "F32", [1], b"\x00" * 4]])
st(f"{w}/missing.safetensors", T[:3])
put(f"{w}/absurd-header.safetensors", struct.pack("<Q", 10**18) + mlp[8:])
put(f"{w}/past-end.safetensors", struct.pack("<Q", len(mlp)) + mlp[8:])
put(f"{w}/short.safetensors", b"\x10\x00\x00\x00")
put(f"{w}/empty.safetensors", b"")
put(f"{w}/json-array.safetensors", struct.pack("<Q", 8) + b"[1,2,3] ")
put(f"{w}/not-json.safetensors", struct.pack("<Q", 8) + b"\xff\xfe\x00abc{}")
st(f"{w}/metadata-number.safetensors", T, meta=5)
st(f"{w}/metadata-value.safetensors", T, meta={"format": 1})
st(f"{w}/negative-shape.safetensors", T, edit=lambda h: h["layers.1.bias"].update(shape=[-256]))
st(f"{w}/offsets-out.safetensors", T, edit=lambda h: h["layers.3.bias"].update(
    data_offsets=[h["layers.3.bias"]["data_offsets"][0] + 8, h["layers.3.bias"]["data_offsets"][1] + 8]))
def overlap(h):
    b0, e0 = h["layers.1.bias"]["data_offsets"]
    h["layers.1.bias"]["data_offsets"] = [b0 - 4, e0 - 4]
st(f"{w}/overlap.safetensors", T, edit=overlap)
st(f"{w}/offsets-text.safetensors", T, edit=lambda h: h["layers.1.bias"].update(data_offsets="0-1024"))
st(f"{w}/no-dtype.safetensors", T, edit=lambda h: h["layers.3.bias"].pop("dtype"))

# checkpoints: each damaged set in its own directory
ck = f"{work}/ck"
src = f"{scratch}/ck-mlp"
c1, c2 = get(f"{src}/ckpt-000000001.safetensors"), get(f"{src}/ckpt-000000002.safetensors")
def ckdir(name, files):
    os.makedirs(f"{ck}/{name}")
    for fname, b in files.items(): put(f"{ck}/{name}/{fname}", b)
flip = lambda b, i, m=0x10: (lambda x: (x.__setitem__(i, x[i] ^ m), x)[1])(bytearray(b))
ckdir("truncated", {"ckpt-000000002.safetensors": c2[: len(c2) // 2]})
ckdir("flip-data", {"ckpt-000000002.safetensors": flip(c2, len(c2) - 3)})
i = c2.find(b'"seed":"') + len('"seed":"'); ckdir("flip-metadata", {"ckpt-000000002.safetensors": flip(c2, i, 0x01)})
ckdir("absurd-header", {"ckpt-000000002.safetensors": struct.pack("<Q", 10**18) + c2[8:]})
ckdir("all-damaged", {"ckpt-000000001.safetensors": flip(c1, len(c1) - 3),
                      "ckpt-000000002.safetensors": c2[:1000]})
ckdir("wrong-model", {"ckpt-000000002.safetensors": get(f"{scratch}/ck-lenet/ckpt-000000002.safetensors")})
ckdir("weights-file", {"ckpt-000000002.safetensors": mlp})
ckdir("empty-file", {"ckpt-000000002.safetensors": b""})
ckdir("good", {"ckpt-000000001.safetensors": c1, "ckpt-000000002.safetensors": c2})
# positive: a damaged newest with a good older one
os.makedirs(f"{scratch}/fallback")
put(f"{scratch}/fallback/ckpt-000000001.safetensors", c1)
put(f"{scratch}/fallback/ckpt-000000002.safetensors", flip(c2, len(c2) - 3))

# hostfiles
h = f"{work}/hosts"
for name, text in {"slots-zero": "node-a slots=0\n", "slots-abc": "node-a slots=2\nnode-b slots=abc\n",
                   "slots-negative": "node-a slots=-2\n", "slots-huge": "node-a slots=99999\n",
                   "slots-twice": "node-a slots=2 slots=2\n", "max-slots": "node-a slots=2 max_slots=x\n",
                   "bad-name": "node@a slots=2\n", "duplicate": "node-a slots=1\nnode-b\nnode-a\n",
                   "garbage": "node-a slots=2\n\x01\x02\x03 slots=1\n", "empty": "", "key-only": "=2 slots=1\n",
                   "four": "node-a slots=2\nnode-b slots=2\n"}.items():
    put(f"{h}/{name}", text.encode())
EOF

# CIFAR-10 binary directories: a good one from the test generator (3 records
# per training file, 2 test records), then damaged copies.
quiet python3 "$(dirname "$(readlink -f "$0")")/../tools/make_cifar10.py" "$WORK/data/cifar-good" --train-per-file 3 --test 2
for name in cifar-no-test cifar-trunc cifar-label-10 cifar-empty; do cp -r "$WORK/data/cifar-good" "$WORK/data/$name"; done
rm "$WORK/data/cifar-no-test/test_batch.bin"
truncate -s -1000 "$WORK/data/cifar-trunc/data_batch_3.bin"  # 3 x 3073 - 1000 = 8219 bytes
printf '\x0a' | dd of="$WORK/data/cifar-label-10/data_batch_2.bin" bs=1 seek=$((2 * 3073)) conv=notrunc status=none
: > "$WORK/data/cifar-empty/data_batch_5.bin"
# llm.c token shards: a good pair, then one damage each.
python3 - "$WORK/data" <<'EOF' || { echo "token shard fixtures failed"; exit 1; }
import os, struct, sys
d = sys.argv[1]
def shard(path, tokens, magic=20240520, version=1, count=None):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *([magic, version, len(tokens) if count is None else count] + [0] * 253)))
        f.write(struct.pack("<%dH" % len(tokens), *tokens))
good = [i % 200 for i in range(4000)]
for name in ("tok-good", "tok-magic", "tok-version", "tok-count", "tok-vocab", "tok-short", "tok-no-val"):
    shard(f"{d}/{name}/x_train_000.bin", good)
    if name != "tok-no-val": shard(f"{d}/{name}/x_val_000.bin", good[:1000])
shard(f"{d}/tok-magic/x_train_001.bin", good, magic=20240521)
shard(f"{d}/tok-version/x_val_000.bin", good, version=2)
shard(f"{d}/tok-count/x_train_000.bin", good, count=5000)
shard(f"{d}/tok-vocab/x_train_000.bin", good[:100] + [300] + good)
shard(f"{d}/tok-short/x_val_000.bin", good[:20])
EOF

# --- the table ---------------------------------------------------------------
# Per row: every path's type, mode, inode, size and mtime (ns), so a file
# written, replaced or created shows; once for all rows: every file's sha256.
# A directory's time is left out: the trainer makes and removes a probe file in
# each output directory before any work (launcher/option_paths.cpp).
manifest() { (cd "$WORK" && find . \( -type d -printf '%y %m %i %p\n' \) -o -printf '%y %m %i %s %T@ %p\n' | sort); }
hashes() { (cd "$WORK" && find . -type f -print0 | sort -z | xargs -0 sha256sum); }
initial_hashes=$(hashes)
failures=0
cases=0

# row NAME EXIT TOOL EXPECTED_TEXT [VAR=VALUE ...] -- ARGS...
#   TOOL trainer: "$TRAINER" with every output flag, then ARGS; stderr starts "error: "
#   TOOL nobody:  the same as an unprivileged user
#   TOOL run:     "$RUN" ARGS;                                  stderr starts "lockstep-run: error: "
row() {
  local name=$1 want=$2 tool=$3 expect=$4; shift 4
  local envs=()
  while [[ $# -gt 0 && $1 != "--" ]]; do envs+=("$1"); shift; done
  shift
  local cmd prefix
  case $tool in
    trainer) cmd=("$TRAINER" "${OUTPUTS[@]}"); prefix="error: " ;;
    nobody) cmd=("${AS_USER[@]}" "$TRAINER" "${OUTPUTS[@]}"); prefix="error: " ;;
    run) cmd=("$RUN"); prefix="lockstep-run: error: " ;;
    *) echo "bad tool $tool in row $name"; exit 1 ;;
  esac
  cases=$((cases + 1))
  local before after out err code lines ok=1
  before=$(manifest)
  out=$(cd "$WORK" && env "${envs[@]}" "${cmd[@]}" "$@" 2>"$SCRATCH/stderr")
  code=$?
  after=$(manifest)
  err=$(cat "$SCRATCH/stderr")
  lines=$(grep -c '' "$SCRATCH/stderr")
  [[ $code -eq $want ]] || { echo "FAIL $name: exit code $code, expected $want"; ok=0; }
  [[ $lines -eq 1 ]] || { echo "FAIL $name: $lines stderr lines"; ok=0; }
  [[ $err == "$prefix"* ]] || { echo "FAIL $name: stderr does not start with '$prefix'"; ok=0; }
  [[ $err == *"$expect"* ]] || { echo "FAIL $name: stderr lacks '$expect'"; ok=0; }
  [[ -z $out ]] || { echo "FAIL $name: wrote to stdout: ${out:0:200}"; ok=0; }
  if [[ $before != "$after" ]]; then
    echo "FAIL $name: files under the work directory changed:"
    diff <(echo "$before") <(echo "$after") | grep '^[<>]' | head -5 | sed 's/^/       /'
    ok=0
    rm -rf "$OUT"/metrics.jsonl "$OUT"/weights.safetensors "$OUT"/timeline.json  # keep later rows independent
  fi
  if [[ $ok -eq 1 ]]; then echo "ok   $name: $err"; else echo "     stderr: $err"; failures=$((failures + 1)); fi
}

D=$WORK/data W=$WORK/w C=$WORK/ck H=$WORK/hosts
MN="--dataset mnist-format --epochs 1 --batch-size 16 --data-dir"
CKR="$SYN --model mlp --resume --checkpoint-dir"

# Flags.
row unknown-model 2 trainer "--model: 'resnet9000' is unknown" -- --model resnet9000
row zero-batch 2 trainer "--batch-size: 0 must be positive" -- --batch-size 0
row negative-batch 2 trainer "--batch-size: -5 must be positive" -- --batch-size -5
row text-batch 2 trainer "--batch-size: 'abc' is not an integer" -- --batch-size abc
row zero-epochs 2 trainer "--epochs: 0 must be positive" -- --epochs 0
row negative-lr 2 trainer "--lr: -1 must be positive" -- --lr -1
row nan-lr 2 trainer "--lr: 'nan' is not a finite number" -- --lr nan
row big-momentum 2 trainer "--momentum: 1.5 must be in [0, 1)" -- --momentum 1.5
row negative-threads 2 trainer "--threads: -1 must not be negative" -- --threads -1
row negative-loader-threads 2 trainer "--loader-threads: -2 must not be negative" -- --loader-threads -2
row many-loader-threads 2 trainer "--loader-threads: 65 is more than 64" -- --loader-threads 65
row env-loader-threads 2 trainer "LOCKSTEP_LOADER_THREADS=x: --loader-threads" LOCKSTEP_LOADER_THREADS=x -- $SYN
row benchmark-input-alone 2 trainer "--benchmark-input fixed: needs --benchmark" -- $SYN --benchmark-input fixed
row unknown-benchmark-input 2 trainer "--benchmark-input: 'disk' is not one of loader, fixed" -- --benchmark --benchmark-input disk
row fixed-batch-crop-flip 2 trainer "--benchmark-input fixed and --augment crop-flip" -- --benchmark --benchmark-input fixed --augment crop-flip
row env-benchmark-input 2 trainer "LOCKSTEP_BENCHMARK_INPUT=x: --benchmark-input: 'x' is not one of" LOCKSTEP_BENCHMARK_INPUT=x -- --benchmark
row missing-data-dir 2 trainer "--data-dir: $WORK/nope is not a directory" -- --data-dir "$WORK/nope"
row unknown-dataset 2 trainer "--dataset: 'imagenet' is not one of" -- --dataset imagenet
row unknown-optimizer 2 trainer "--optimizer: 'lamb' is not one of sgd, adam, adamw" -- --optimizer lamb
row unknown-checkpoint-write 2 trainer "--checkpoint-write: 'later' is not one of background, sync" -- $SYN --checkpoint-write later
row unknown-checkpoint-failure 2 trainer "--checkpoint-failure: 'retry' is not one of continue, stop" -- $SYN --checkpoint-failure retry
row unknown-flag 2 trainer "Option 'frobnicate' does not exist" -- --frobnicate 3
row switch-value 2 trainer "--cuda-graph: 'maybe' is not a switch value (true or false, 1 or 0)" -- $SYN --cuda-graph=maybe
row positional 2 trainer "unexpected argument 'extra'" -- extra
row cuda-device 2 trainer "--device cuda" -- --device cuda
row comm-nccl-on-cpu 2 trainer "--comm nccl: needs --device cuda" -- --comm nccl
row unknown-comm 2 trainer "--comm: 'gloo' is not one of auto, nccl, mpi" -- --comm gloo
row env-comm-nccl-on-cpu 2 trainer "--comm nccl: needs --device cuda (CPU gradients go over MPI) (set by LOCKSTEP_COMM)" LOCKSTEP_COMM=nccl -- $SYN
row precision-on-cpu 2 trainer "--precision bf16: needs --device cuda (the CPU computes in fp32)" -- $SYN --device cpu --precision bf16
row precision-auto-no-gpu 2 trainer "--precision bf16: needs --device cuda (the CPU computes in fp32); --device auto chose the CPU: " -- $SYN --precision bf16
row unknown-precision 2 trainer "--precision: 'fp8' is not one of fp32, bf16, fp16" -- --precision fp8
row fp16-on-cpu 2 trainer "--precision fp16: needs --device cuda (the CPU computes in fp32)" -- $SYN --precision fp16
row loss-scale-small 2 trainer "--loss-scale: 0.5 must be from 1 to 2^24" -- $SYN --loss-scale 0.5
row loss-scale-text 2 trainer "LOCKSTEP_LOSS_SCALE=big: --loss-scale: 'big' is not a finite number" LOCKSTEP_LOSS_SCALE=big -- $SYN
row loss-scale-window-zero 2 trainer "--loss-scale-window: 0 must be positive" -- $SYN --loss-scale-window 0
row cuda-graph-on-cpu 2 trainer "--cuda-graph: needs --device cuda" -- $SYN --cuda-graph
row env-cuda-graph-on-cpu 2 trainer "--cuda-graph: needs --device cuda (set by LOCKSTEP_CUDA_GRAPH); --device auto chose the CPU: " LOCKSTEP_CUDA_GRAPH=1 -- $SYN
row cudnn-benchmark-on-cpu 2 trainer "--cudnn-benchmark: needs --device cuda" -- $SYN --cudnn-benchmark
row cudnn-nondet-on-cpu 2 trainer "--cudnn-nondeterministic: needs --device cuda" -- $SYN --cudnn-nondeterministic
row cudnn-workspace-zero 2 trainer "--cudnn-workspace-mb: 0 must be positive" -- $SYN --cudnn-workspace-mb 0
row cudnn-workspace-huge 2 trainer "--cudnn-workspace-mb: 2000000 is more than 1048576 (1 TiB)" -- $SYN --device cuda --cudnn-workspace-mb 2000000
row env-cudnn-workspace-on-cpu 2 trainer "--cudnn-workspace-mb: needs --device cuda (set by LOCKSTEP_CUDNN_WORKSPACE_MB)" LOCKSTEP_CUDNN_WORKSPACE_MB=4096 -- $SYN
row synthetic-samples-huge 2 trainer "--synthetic-samples: out of host memory for the shuffled order of 100000000000 samples (762939 MiB), with " -- --model mlp --dataset synthetic --synthetic-samples 100000000000
row unknown-layout 2 trainer "--layout: 'NHWC' is not one of auto, nchw, nhwc" -- $SYN --layout NHWC
row env-layout 2 trainer "LOCKSTEP_LAYOUT=chw: --layout: 'chw' is not one of auto, nchw, nhwc" LOCKSTEP_LAYOUT=chw -- $SYN
row unknown-conv-algorithm 2 trainer "--conv-algorithm: 'fft' is not one of auto, im2col, winograd" -- $SYN --conv-algorithm fft
row env-conv-algorithm 2 trainer "LOCKSTEP_CONV_ALGORITHM=Im2col: --conv-algorithm: 'Im2col' is not one of auto, im2col, winograd" LOCKSTEP_CONV_ALGORITHM=Im2col -- $SYN
row conv-algorithm-nhwc 2 trainer "--conv-algorithm im2col: needs --layout nchw (NHWC convolutions on the CPU are always im2col + GEMM)" -- $SYN --layout nhwc --conv-algorithm im2col
row conv-algorithm-cuda 2 trainer "--conv-algorithm winograd: chooses the CPU's convolutions (on the GPU cuDNN chooses; see --cudnn-benchmark)" -- $SYN --device cuda --conv-algorithm winograd
row metrics-dir 2 trainer "--metrics-file: directory $WORK/no/such does not exist" -- --metrics-file "$WORK/no/such/m.jsonl"
row weights-to-dir 2 trainer "--save-weights: $WORK is a directory" -- $SYN --save-weights "$WORK"
row timeline-dir 2 trainer "--timeline: directory $WORK/no/such does not exist" -- $SYN --timeline "$WORK/no/such/t.json"
row huge-global-batch 2 trainer "global batch 100000 is larger than the data set" -- $SYN --global-batch-size 100000
row uneven-global-batch 2 trainer "--global-batch-size 50 does not split evenly over 1 ranks x 4" -- $SYN --global-batch-size 50 --accumulate-steps 4
row bad-shape 2 trainer "--synthetic-shape: '1,28' must be three positive extents" -- --dataset synthetic --synthetic-shape 1,28
row shape-too-small 2 trainer "--model lenet: samples of shape [1, 4, 4] are too small" -- $SYN --synthetic-shape 1,4,4 --model lenet
row step-schedule 2 trainer "--lr-schedule step needs --lr-step-epochs > 0" -- --lr-schedule step
row nesterov 2 trainer "--nesterov needs --momentum > 0" -- --nesterov --momentum 0
row bad-log-level 2 trainer "--log-level: 'loud' is not one of" -- --log-level loud
row bad-target 2 trainer "--target-accuracy: 1.5 must be in [0, 1]" -- --target-accuracy 1.5
row target-no-eval 2 trainer "--target-accuracy needs evaluation" -- --target-accuracy 0.5 --no-eval
row replicas-negative 2 trainer "--check-replicas-every: -2 must not be negative" -- $SYN --check-replicas-every -2
row inject-unknown 2 trainer "--inject-fault: 'crash@1:2' is not replica-drift@RANK:STEP or error@RANK:STEP" -- $SYN --inject-fault crash@1:2
row inject-step-zero 2 trainer "--inject-fault: 'replica-drift@1:0' needs a rank >= 0 and a step >= 1" -- $SYN --inject-fault replica-drift@1:0
row inject-error-rank 2 trainer "--inject-fault: 'error@-1:2' needs a rank >= 0 (or all) and a step >= 1" -- $SYN --inject-fault error@-1:2
row inject-drift-all 2 trainer "--inject-fault: 'all' is not an integer" -- $SYN --inject-fault replica-drift@all:2

# The large-batch recipe, --benchmark and --image-size.
row lr-scaling-bogus 2 trainer "--lr-scaling: 'bogus' is not one of none, linear" -- $SYN --lr-scaling bogus
row base-batch-zero 2 trainer "--base-batch-size: 0 must be positive" -- $SYN --lr-scaling linear --base-batch-size 0
row label-smoothing-one 2 trainer "--label-smoothing: 1 must be in [0, 1)" -- $SYN --label-smoothing 1
row label-smoothing-negative 2 trainer "--label-smoothing: -0.1 must be in [0, 1)" -- $SYN --label-smoothing -0.1
row label-smoothing-nan 2 trainer "--label-smoothing: 'nan' is not a finite number" -- $SYN --label-smoothing nan
row clip-grad-norm-negative 2 trainer "--clip-grad-norm: -1 must not be negative" -- $SYN --clip-grad-norm -1
row clip-grad-norm-inf 2 trainer "--clip-grad-norm: 'inf' is not a finite number" -- $SYN --clip-grad-norm inf
row clip-grad-norm-word 2 trainer "--clip-grad-norm: 'max' is not a finite number" -- $SYN --clip-grad-norm max
row image-size-negative 2 trainer "--image-size: -1 must not be negative" -- --benchmark --image-size -1
row image-size-too-small 2 trainer "--model lenet: samples of shape [1, 3, 3] are too small" -- --benchmark --model lenet --image-size 3
row image-size-huge 2 trainer "--image-size: 5000 makes 1 x 5000 x 5000 values per sample, more than 16777216" -- --benchmark --image-size 5000
row image-size-real-data 2 trainer "--image-size and --dataset fashion-mnist: --image-size shapes synthetic samples" -- --image-size 32
row benchmark-real-data 2 trainer "--benchmark and --dataset fashion-mnist: benchmark mode trains on synthetic data" -- --benchmark --dataset fashion-mnist
row benchmark-target 2 trainer "--benchmark and --target-accuracy: benchmark mode does not evaluate" -- --benchmark --target-accuracy 0.5
row env-benchmark-dataset 2 trainer "--benchmark and --dataset mnist-format: benchmark mode trains on synthetic data shaped for the model (drop --dataset) (set by LOCKSTEP_BENCHMARK, LOCKSTEP_DATASET)" LOCKSTEP_BENCHMARK=true LOCKSTEP_DATASET=mnist-format --
row env-label-smoothing 2 trainer "LOCKSTEP_LABEL_SMOOTHING=2: --label-smoothing: 2 must be in [0, 1)" LOCKSTEP_LABEL_SMOOTHING=2 -- $SYN
row env-clip-grad-norm 2 trainer "LOCKSTEP_CLIP_GRAD_NORM=-0.5: --clip-grad-norm: -0.5 must not be negative" LOCKSTEP_CLIP_GRAD_NORM=-0.5 -- $SYN
row zero-stage-two 2 trainer "--zero-stage: '2' is not one of 0, 1" -- $SYN --zero-stage 2
row zero-stage-word 2 trainer "--zero-stage: 'on' is not one of 0, 1" -- $SYN --zero-stage on
row zero-stage-cuda 2 trainer "--zero-stage 1: the optimizer state is sharded on the CPU path only (not yet with --device cuda)" -- $SYN --zero-stage 1 --device cuda
row env-zero-stage 2 trainer "LOCKSTEP_ZERO_STAGE=3: --zero-stage: '3' is not one of 0, 1" LOCKSTEP_ZERO_STAGE=3 -- $SYN
row hierarchical-word 2 trainer "--hierarchical-allreduce: 'yes' is not one of auto, on, off" -- $SYN --hierarchical-allreduce yes
row env-hierarchical 2 trainer "LOCKSTEP_HIERARCHICAL_ALLREDUCE=sometimes: --hierarchical-allreduce: 'sometimes' is not one of auto, on, off" LOCKSTEP_HIERARCHICAL_ALLREDUCE=sometimes -- $SYN
row overlap-word 2 trainer "--overlap: 'yes' is not one of auto, on, off" -- $SYN --overlap yes
row env-overlap 2 trainer "LOCKSTEP_OVERLAP=never: --overlap: 'never' is not one of auto, on, off" LOCKSTEP_OVERLAP=never -- $SYN
row overlap-contradiction 2 trainer "--no-overlap and --overlap on contradict each other" -- $SYN --no-overlap --overlap on
row env-overlap-contradiction 2 trainer "--no-overlap and --overlap on contradict each other" LOCKSTEP_NO_OVERLAP=1 -- $SYN --overlap on

# Environment variables.
row env-batch 2 trainer "LOCKSTEP_BATCH_SIZE=zero: --batch-size: 'zero' is not an integer" LOCKSTEP_BATCH_SIZE=zero -- --dataset synthetic
row env-model 2 trainer "LOCKSTEP_MODEL=nope: --model: 'nope' is unknown" LOCKSTEP_MODEL=nope --
row env-negative-epochs 2 trainer "LOCKSTEP_EPOCHS=-3: --epochs: -3 must be positive" LOCKSTEP_EPOCHS=-3 -- $SYN
row env-text-lr 2 trainer "LOCKSTEP_LR=fast: --lr: 'fast' is not a" LOCKSTEP_LR=fast -- $SYN
row env-optimizer 2 trainer "LOCKSTEP_OPTIMIZER=lamb: --optimizer: 'lamb' is not one of" LOCKSTEP_OPTIMIZER=lamb -- $SYN
row env-compression 2 trainer "LOCKSTEP_GRAD_COMPRESSION=int8: --grad-compression: 'int8' is not one of" LOCKSTEP_GRAD_COMPRESSION=int8 -- $SYN
row env-threads 2 trainer "LOCKSTEP_THREADS=5000: --threads: 5000 is more than 1024" LOCKSTEP_THREADS=5000 -- $SYN
row env-timeout 2 trainer "LOCKSTEP_COLLECTIVE_TIMEOUT=0.5: --collective-timeout: 0.5 must be 0 (off) or from 1" LOCKSTEP_COLLECTIVE_TIMEOUT=0.5 -- $SYN
row env-resume-bool 2 trainer "LOCKSTEP_RESUME=maybe: --resume: 'maybe' is not a switch value" LOCKSTEP_RESUME=maybe -- $SYN
row env-combination 2 trainer "--checkpoint-every needs --checkpoint-dir (set by LOCKSTEP_CHECKPOINT_EVERY)" LOCKSTEP_CHECKPOINT_EVERY=5 -- $SYN
row env-resume-no-dir 2 trainer "--resume needs --checkpoint-dir (set by LOCKSTEP_RESUME)" LOCKSTEP_RESUME=true -- $SYN
row env-data-dir 2 trainer "--data-dir: $WORK/nope is not a directory (set by LOCKSTEP_DATA_DIR)" LOCKSTEP_DATASET=mnist-format LOCKSTEP_DATA_DIR="$WORK/nope" --
row env-load-weights 2 trainer "--load-weights: $WORK/none.safetensors is not a file (set by LOCKSTEP_LOAD_WEIGHTS)" LOCKSTEP_LOAD_WEIGHTS="$WORK/none.safetensors" -- $SYN

# MNIST-format data files.
row data-empty-dir 2 trainer "data directory $WORK/empty: missing train-images-idx3-ubyte" -- $MN "$WORK/empty"
row data-no-labels 2 trainer "data directory $D/no-labels: missing train-labels-idx1-ubyte" -- $MN "$D/no-labels"
row data-no-test 2 trainer "missing t10k-images-idx3-ubyte" -- $MN "$D/no-test"
row data-truncated 2 trainer "$D/trunc-images/train-images-idx3-ubyte: file is truncated" -- $MN "$D/trunc-images"
row data-truncated-header 2 trainer "$D/trunc-header/train-labels-idx1-ubyte: file is truncated: the dimension sizes" -- $MN "$D/trunc-header"
row data-empty-file 2 trainer "$D/empty-file/train-images-idx3-ubyte: file is truncated: the header needs 4 bytes, only 0" -- $MN "$D/empty-file"
row data-bad-magic 2 trainer "$D/bad-magic/train-images-idx3-ubyte: not an IDX file (magic bytes 1f 9c" -- $MN "$D/bad-magic"
row data-float-type 2 trainer "$D/float-type/train-images-idx3-ubyte: IDX element type 0x0d is not supported" -- $MN "$D/float-type"
row data-five-dims 2 trainer "$D/five-dims/train-labels-idx1-ubyte: IDX file has 5 dimensions" -- $MN "$D/five-dims"
row data-zero-dim 2 trainer "$D/zero-dim/t10k-labels-idx1-ubyte: dimension 0 has size 0" -- $MN "$D/zero-dim"
row data-huge-dims 2 trainer "$D/huge-dims/train-images-idx3-ubyte: dimensions describe more than" -- $MN "$D/huge-dims"
row data-trailing 2 trainer "$D/trailing/train-labels-idx1-ubyte: unexpected bytes after the 64 elements" -- $MN "$D/trailing"
row data-labels-2d 2 trainer "$D/labels-2d/train-labels-idx1-ubyte: labels need 1 dimension [N], file has 2" -- $MN "$D/labels-2d"
row data-images-2d 2 trainer "$D/images-2d/train-images-idx3-ubyte: images need 3 dimensions [N, H, W], file has 2" -- $MN "$D/images-2d"
row data-count-mismatch 2 trainer "$D/count-mismatch/train-images-idx3-ubyte: 64 images but $D/count-mismatch/train-labels-idx1-ubyte has 60 labels" -- $MN "$D/count-mismatch"
row data-label-10 2 trainer "$D/label-10/train-labels-idx1-ubyte: label 10 of sample 3 is outside [0, 10)" -- $MN "$D/label-10"
row data-label-255 2 trainer "$D/label-255/train-labels-idx1-ubyte: label 255 of sample 0 is outside [0, 10)" -- $MN "$D/label-255"
row data-test-shape 2 trainer "$D/test-shape: train images are [1, 28, 28] but test images are [1, 14, 14]" -- $MN "$D/test-shape"
row data-too-small 2 trainer "--model lenet: samples of shape [1, 4, 4] are too small" -- $MN "$D/tiny-images" --model lenet
row data-corrupt-gz 2 trainer "$D/corrupt-gz/train-images-idx3-ubyte.gz: corrupt compressed data" -- $MN "$D/corrupt-gz"
row data-cut-gz 2 trainer "$D/cut-gz/train-labels-idx1-ubyte.gz:" -- $MN "$D/cut-gz"

# CIFAR-10 binary files, --augment.
CF="--dataset cifar10 --epochs 1 --batch-size 8 --data-dir"
row cifar-missing-dir 2 trainer "--data-dir: $WORK/nope is not a directory" -- $CF "$WORK/nope"
row cifar-no-test 2 trainer "data directory $D/cifar-no-test: missing test_batch.bin (CIFAR-10 binary format: data_batch_1.bin" -- $CF "$D/cifar-no-test"
row cifar-mnist-dir 2 trainer "data directory $D/good: missing data_batch_1.bin" -- $CF "$D/good"
row cifar-truncated 2 trainer "$D/cifar-trunc/data_batch_3.bin is 8219 bytes, not a whole number of 3073-byte records" -- $CF "$D/cifar-trunc"
row cifar-label-10 2 trainer "$D/cifar-label-10/data_batch_2.bin: label 10 of record 2 is outside [0, 10)" -- $CF "$D/cifar-label-10"
row cifar-empty-file 2 trainer "$D/cifar-empty/data_batch_5.bin: empty file" -- $CF "$D/cifar-empty"
TK="--model gpt2-tiny --dataset tokens --vocab-size 256 --seq-len 32 --n-layer 1 --n-embd 32 --n-head 2 --epochs 1 --batch-size 4 --data-dir"
row tokens-bad-magic 2 trainer "$D/tok-magic/x_train_001.bin: not a token shard (magic 20240521, expected 20240520)" -- $TK "$D/tok-magic"
row tokens-bad-version 2 trainer "$D/tok-version/x_val_000.bin: token shard version 2 (this reader knows version 1)" -- $TK "$D/tok-version"
row tokens-count-past-end 2 trainer "$D/tok-count/x_train_000.bin: the header counts 5000 tokens, the file holds 4000 (truncated)" -- $TK "$D/tok-count"
row tokens-above-vocab 2 trainer "$D/tok-vocab/x_train_000.bin: token 300 at position 100 is outside the vocabulary of 256" -- $TK "$D/tok-vocab"
row tokens-val-too-short 2 trainer "--data-dir $D/tok-short: the val shards hold 20 tokens, no window of 33" -- $TK "$D/tok-short"
row tokens-no-val 2 trainer "$D/tok-no-val: no token shards for the val split" -- $TK "$D/tok-no-val"
row tokens-no-data-dir 2 trainer "--dataset tokens needs --data-dir: the directory of llm.c token shards" -- --model gpt2-tiny --dataset tokens
row tokens-heads-divide 2 trainer "--n-head 3 does not divide --n-embd 32" -- ${TK/--n-head 2/--n-head 3} "$D/tok-good"
row tokens-seq-above-context 2 trainer "--seq-len 300 is outside the model's context [1, 256]" -- ${TK/--seq-len 32/--seq-len 300} "$D/tok-good"
row tokens-vocab-too-small 2 trainer "$D/tok-good/x_train_000.bin: token 100 at position 100 is outside the vocabulary of 100" -- ${TK/--vocab-size 256/--vocab-size 100} "$D/tok-good"
row tokens-image-model 2 trainer "--model lenet and --dataset tokens: --dataset tokens holds token sequences, for the GPT-2 models" -- --model lenet --dataset tokens --data-dir "$D/tok-good"
row tokens-gpt2-on-images 2 trainer "--model gpt2-tiny and --dataset fashion-mnist: GPT-2 models read token sequences" -- --model gpt2-tiny
row tokens-sizes-on-cnn 2 trainer "--model mlp reads images: --vocab-size, --seq-len, --n-layer, --n-head and --n-embd size GPT-2 models" -- $SYN --model mlp --n-layer 2
row tokens-bad-vocab-file 2 trainer "--vocab-file: $D/tok-good/gpt2.tiktoken" -- $TK "$D/tok-good" --sample-tokens 5
row tokens-prompt-without-sample 2 trainer "--prompt needs --sample-tokens" -- $TK "$D/tok-good" --prompt hi
row tokens-min-lr-not-cosine 2 trainer "--min-lr needs --lr-schedule cosine" -- $TK "$D/tok-good" --min-lr 1e-5
row tokens-two-warmups 2 trainer "--warmup-steps and --warmup-epochs: give the warmup's length once" -- $TK "$D/tok-good" --warmup-steps 5 --warmup-epochs 1
row tokens-beta2 2 trainer "--beta2: 1 must be in [0, 1)" -- $TK "$D/tok-good" --beta2 1
row cifar-no-data-dir 2 trainer "--dataset cifar10 needs --data-dir: the directory of data_batch_1.bin ... data_batch_5.bin and test_batch.bin" -- --dataset cifar10
row env-cifar-no-data-dir 2 trainer "--dataset cifar10 needs --data-dir: the directory of data_batch_1.bin ... data_batch_5.bin and test_batch.bin (from https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz) (set by LOCKSTEP_DATASET)" LOCKSTEP_DATASET=cifar10 --
row augment-bogus 2 trainer "--augment: 'bogus' is not one of auto, none, crop-flip" -- $SYN --augment bogus
row env-augment-bogus 2 trainer "LOCKSTEP_AUGMENT=bogus: --augment: 'bogus' is not one of auto, none, crop-flip" LOCKSTEP_AUGMENT=bogus -- $SYN

# Weights (--load-weights); precious.safetensors as the --save-weights target must survive.
LW="$SYN --model mlp --load-weights"
row weights-missing 2 trainer "--load-weights: $WORK/none.safetensors is not a file" -- $LW "$WORK/none.safetensors"
row weights-directory 2 trainer "--load-weights: $W is not a file" -- $LW "$W"
row weights-garbage 2 trainer "$OUT/precious.safetensors: header length" -- $LW "$OUT/precious.safetensors"
row weights-empty 2 trainer "$W/empty.safetensors: not a safetensors file (0 bytes" -- $LW "$W/empty.safetensors"
row weights-short 2 trainer "$W/short.safetensors: not a safetensors file (4 bytes" -- $LW "$W/short.safetensors"
row weights-truncated 2 trainer "$W/truncated.safetensors: tensor 'layers.3.bias' data_offsets" -- $LW "$W/truncated.safetensors" --save-weights "$OUT/precious.safetensors"
row weights-flip-data 2 trainer "$W/flip-data.safetensors: tensor 'layers.3.bias' fails its checksum (the file is damaged)" -- $LW "$W/flip-data.safetensors" --save-weights "$OUT/precious.safetensors"
row weights-flip-metadata 2 trainer "$W/flip-metadata.safetensors: metadata checksum mismatch" -- $LW "$W/flip-metadata.safetensors"
row weights-flip-brace 2 trainer "$W/flip-brace.safetensors: header is not a JSON object" -- $LW "$W/flip-brace.safetensors"
row weights-flip-shape 2 trainer "$W/flip-shape.safetensors: tensor 'layers.1.weight' is [256,785] F32 but data_offsets span" -- $LW "$W/flip-shape.safetensors"
row weights-flip-length 2 trainer "$W/flip-length.safetensors: header length" -- $LW "$W/flip-length.safetensors"
row weights-wrong-model 2 trainer "$W/mlp.safetensors: missing tensor 'layers.0.weight' that model lenet needs" -- $SYN --model lenet --load-weights "$W/mlp.safetensors"
row weights-wrong-model2 2 trainer "$W/lenet.safetensors: missing tensor 'layers.1.weight' that model mlp needs" -- $LW "$W/lenet.safetensors"
row weights-f16 2 trainer "$W/f16.safetensors: tensor 'layers.1.weight' is F16, expected F32" -- $LW "$W/f16.safetensors"
row weights-i32 2 trainer "$W/i32.safetensors: tensor 'layers.3.bias' is I32, expected F32" -- $LW "$W/i32.safetensors"
row weights-unknown-dtype 2 trainer "$W/unknown-dtype.safetensors: tensor 'layers.1.bias' has unsupported dtype \"F8_E9\"" -- $LW "$W/unknown-dtype.safetensors"
row weights-transposed 2 trainer "$W/transposed.safetensors: tensor 'layers.1.weight' has shape [784, 256], model mlp expects [256, 784]" -- $LW "$W/transposed.safetensors"
row weights-extra 2 trainer "$W/extra.safetensors: tensor 'layers.9.weight' is not a parameter of model mlp" -- $LW "$W/extra.safetensors"
row weights-missing-tensor 2 trainer "$W/missing.safetensors: missing tensor 'layers.3.bias' that model mlp needs" -- $LW "$W/missing.safetensors"
row weights-absurd-header 2 trainer "$W/absurd-header.safetensors: header length 1000000000000000000 is larger than the 100000000 byte limit" -- $LW "$W/absurd-header.safetensors"
row weights-past-end 2 trainer "$W/past-end.safetensors: header length" -- $LW "$W/past-end.safetensors"
row weights-json-array 2 trainer "$W/json-array.safetensors: header is not a JSON object" -- $LW "$W/json-array.safetensors"
row weights-not-json 2 trainer "$W/not-json.safetensors: header is not a JSON object" -- $LW "$W/not-json.safetensors"
row weights-metadata-number 2 trainer "$W/metadata-number.safetensors: __metadata__ is not an object" -- $LW "$W/metadata-number.safetensors"
row weights-metadata-value 2 trainer "$W/metadata-value.safetensors: metadata value of 'format' is not a string" -- $LW "$W/metadata-value.safetensors"
row weights-negative-shape 2 trainer "$W/negative-shape.safetensors: tensor 'layers.1.bias' has an invalid shape [-256]" -- $LW "$W/negative-shape.safetensors"
row weights-offsets-out 2 trainer "$W/offsets-out.safetensors: tensor 'layers.3.bias' data_offsets" -- $LW "$W/offsets-out.safetensors"
row weights-overlap 2 trainer "$W/overlap.safetensors: tensor 'layers.1.bias' data at byte" -- $LW "$W/overlap.safetensors"
row weights-offsets-text 2 trainer "$W/offsets-text.safetensors: tensor 'layers.1.bias' has invalid data_offsets" -- $LW "$W/offsets-text.safetensors"
row weights-no-dtype 2 trainer "$W/no-dtype.safetensors: tensor 'layers.3.bias' lacks dtype, shape or data_offsets" -- $LW "$W/no-dtype.safetensors"

# Checkpoints (--resume): every file byte-identical afterwards, nothing new in the directory.
row ckpt-truncated 2 trainer "--resume: no usable checkpoint in $C/truncated (1 found; the newest: $C/truncated/$CK2: " -- $CKR "$C/truncated"
row ckpt-flip-data 2 trainer "$C/flip-data/$CK2: tensor 'optimizer." -- $CKR "$C/flip-data"
row ckpt-flip-metadata 2 trainer "$C/flip-metadata/$CK2: metadata checksum mismatch (the file is damaged)" -- $CKR "$C/flip-metadata"
row ckpt-absurd-header 2 trainer "$C/absurd-header/$CK2: header length 1000000000000000000 is larger" -- $CKR "$C/absurd-header"
row ckpt-all-damaged 2 trainer "--resume: no usable checkpoint in $C/all-damaged (2 found; the newest: $C/all-damaged/$CK2:" -- $CKR "$C/all-damaged"
row ckpt-wrong-model 2 trainer "$C/wrong-model/$CK2: checkpoint of model lenet, this run trains mlp" -- $CKR "$C/wrong-model"
row ckpt-weights-file 2 trainer "$C/weights-file/$CK2:" -- $CKR "$C/weights-file"
row ckpt-empty-file 2 trainer "$C/empty-file/$CK2: not a safetensors file (0 bytes" -- $CKR "$C/empty-file"
row ckpt-wrong-optimizer 2 trainer "$C/good/$CK2: checkpoint of optimizer sgd, this run uses adam" -- $CKR "$C/good" --optimizer adam
row ckpt-wrong-seed 2 trainer "--resume: $C/good/$CK2 was written with --seed" -- $CKR "$C/good" --seed 7
row ckpt-wrong-batch 2 trainer "--resume: $C/good/$CK2 was written with global batch 16, this run uses 32" -- $CKR "$C/good" --batch-size 32
row ckpt-dir-is-file 2 trainer "--checkpoint-dir: $OUT/precious.safetensors is not a directory" -- $CKR "$OUT/precious.safetensors"
row ckpt-no-parent 2 trainer "--checkpoint-dir: parent directory $WORK/no/such does not exist" -- $SYN --checkpoint-dir "$WORK/no/such/ck"
row ckpt-new-dir-bad-weights 2 trainer "$W/flip-data.safetensors: tensor 'layers.3.bias' fails its checksum" -- $LW "$W/flip-data.safetensors" --checkpoint-dir "$OUT/new-ckpt"
row ckpt-resume-no-dir 2 trainer "--resume needs --checkpoint-dir" -- $SYN --resume
row tb-dir-is-file 2 trainer "--tensorboard-dir: $OUT/precious.safetensors is not a directory" -- $SYN --tensorboard-dir "$OUT/precious.safetensors"
row tb-no-parent 2 trainer "--tensorboard-dir: parent directory $WORK/no/such does not exist" -- $SYN --tensorboard-dir "$WORK/no/such/tb"
row tb-unwritable 2 nobody "--tensorboard-dir: cannot write to directory $WORK/read-only (Permission denied)" -- $SYN --tensorboard-dir "$WORK/read-only/tb"
row tb-env-no-parent 2 trainer "--tensorboard-dir: parent directory $WORK/no/such does not exist (set by LOCKSTEP_TENSORBOARD_DIR)" LOCKSTEP_TENSORBOARD_DIR="$WORK/no/such/tb" -- $SYN
row ckpt-unwritable 2 nobody "--checkpoint-dir: cannot write to directory $WORK/read-only (Permission denied)" -- $SYN --checkpoint-dir "$WORK/read-only"
row ckpt-unwritable-parent 2 nobody "--checkpoint-dir: cannot write to directory $WORK/read-only (Permission denied)" -- $SYN --checkpoint-dir "$WORK/read-only/ck"
row metrics-unwritable 2 nobody "--metrics-file: cannot write to directory $WORK/read-only (Permission denied)" -- $SYN --metrics-file "$WORK/read-only/m.jsonl"
# Where the permission bits say yes but no file can be made (root on /proc):
# found before training, not after it (the weights were then lost).
row save-weights-procfs 2 trainer "--save-weights: cannot write to directory /proc (" -- $SYN --save-weights /proc/w.safetensors
row ckpt-procfs 2 trainer "--checkpoint-dir: cannot write to directory /proc (" -- $SYN --checkpoint-dir /proc/ck

# Hostfiles (lockstep-run; tests/cluster/launch_cli.sh has slots=two, an unknown key, a bare count, a repeated host, a comment-only file).
row host-missing 2 run "--hostfile: $H/no/such is not a file" -- --dry-run --hostfile "$H/no/such" "$TRAINER"
row host-directory 2 run "--hostfile: $H is not a file" -- --dry-run --hostfile "$H" "$TRAINER"
row host-empty 2 run "--hostfile: $H/empty lists no hosts" -- --dry-run --hostfile "$H/empty" "$TRAINER"
row host-slots-zero 2 run "$H/slots-zero:1: slots '0' is not a whole number from 1 to 4096" -- --dry-run --hostfile "$H/slots-zero" "$TRAINER"
row host-slots-abc 2 run "$H/slots-abc:2: slots 'abc' is not a whole number" -- --dry-run --hostfile "$H/slots-abc" "$TRAINER"
row host-slots-negative 2 run "$H/slots-negative:1: slots '-2' is not a whole number" -- --dry-run --hostfile "$H/slots-negative" "$TRAINER"
row host-slots-huge 2 run "$H/slots-huge:1: slots '99999' is not a whole number from 1 to 4096" -- --dry-run --hostfile "$H/slots-huge" "$TRAINER"
row host-slots-twice 2 run "$H/slots-twice:1: slots given twice" -- --dry-run --hostfile "$H/slots-twice" "$TRAINER"
row host-max-slots 2 run "$H/max-slots:1: max_slots 'x' is not a whole number" -- --dry-run --hostfile "$H/max-slots" "$TRAINER"
row host-bad-name 2 run "$H/bad-name:1: 'node@a' is not a host name" -- --dry-run --hostfile "$H/bad-name" "$TRAINER"
row host-garbage 2 run "$H/garbage:2: '\\x01\\x02\\x03' is not a host name" -- --dry-run --hostfile "$H/garbage" "$TRAINER"
row host-key-only 2 run "$H/key-only:1: '=2' is not a host name" -- --dry-run --hostfile "$H/key-only" "$TRAINER"
row host-duplicate 2 run "$H/duplicate:3: host 'node-a' is already listed" -- --dry-run --hostfile "$H/duplicate" "$TRAINER"
row host-np-beyond 2 run "-np 5 asks for more processes than the hosts have slots (4)" -- --dry-run -np 5 --hostfile "$H/four" "$TRAINER"
row host-and-H 2 run "-H and --hostfile: give one or the other" -- --dry-run -H a:2 --hostfile "$H/four" "$TRAINER"
row host-H-empty-entry 2 run "-H entry 2 (''): '' is not a host name" -- --dry-run -H a:2,,b "$TRAINER"
row abort-grace-text 2 run "--abort-grace: 'soon' is not a number of seconds from 0 to 3600" -- --dry-run --abort-grace soon -np 2 "$TRAINER"
row abort-grace-negative 2 run "--abort-grace: '-1' is not a number of seconds from 0 to 3600" -- --dry-run --abort-grace -1 -np 2 "$TRAINER"

# --- positive rows: what must NOT be an error ---------------------------------
# accepts NAME WARNING_TEXT_OR_EMPTY [VAR=VALUE ...] -- ARGS...: exit 0; stderr is
# exactly that one warning line (or nothing).
accepts() {
  local name=$1 expect=$2; shift 2
  local envs=()
  while [[ $# -gt 0 && $1 != "--" ]]; do envs+=("$1"); shift; done
  shift
  cases=$((cases + 1))
  local code lines ok=1
  env "${envs[@]}" "$TRAINER" --progress off --epochs 1 --max-steps 1 --no-eval "$@" >"$SCRATCH/stdout" 2>"$SCRATCH/all-stderr"
  code=$?
  # The input-bound warning is a measurement: a few ms-long steps on a busy
  # machine can wait for their batch (seen at 17%). Not what these rows check.
  grep -v '^warning: input-bound: ' "$SCRATCH/all-stderr" > "$SCRATCH/stderr" || true
  lines=$(grep -c '' "$SCRATCH/stderr")
  [[ $code -eq 0 ]] || { echo "FAIL $name: exit code $code, expected 0"; ok=0; }
  if [[ -z $expect ]]; then
    [[ $lines -eq 0 ]] || { echo "FAIL $name: $lines stderr lines, expected none"; ok=0; }
  else
    [[ $lines -eq 1 && $(cat "$SCRATCH/stderr") == "warning: "*"$expect"* ]] || { echo "FAIL $name: stderr is not one warning with '$expect'"; ok=0; }
  fi
  if [[ $ok -eq 1 ]]; then echo "ok   $name (accepted) $(cat "$SCRATCH/stderr")"; else sed 's/^/     stderr: /' "$SCRATCH/stderr" | head -5; failures=$((failures + 1)); fi
}
accepts unknown-variable-warns "ignored: LOCKSTEP_FROBNICATE is set but names no trainer option" LOCKSTEP_FROBNICATE=1 -- $SYN
accepts damaged-newest-falls-back "skipping checkpoint $SCRATCH/fallback/$CK2: $SCRATCH/fallback/$CK2: tensor 'optimizer." -- $CKR "$SCRATCH/fallback" --max-steps 3
accepts weights-without-checksums "" -- $LW "$SCRATCH/plain.safetensors"
accepts benchmark-explicit-synthetic "" -- --benchmark --dataset synthetic --model mlp --batch-size 16
accepts eval-batch-above-test-set "" -- $SYN --model mlp --epochs 1 --eval-batch-size 99999999999
accepts synthetic-shape-over-image-size "" -- $SYN --model mlp --synthetic-shape 1,20,20 --image-size 16
accepts recipe-flags "" LOCKSTEP_LR_SCALING=linear -- $SYN --model mlp --base-batch-size 64 --warmup-epochs 1 --no-decay-bn-bias --label-smoothing 0.1 --weight-decay 1e-4 --clip-grad-norm 1
accepts cifar10-good "" -- --dataset cifar10 --data-dir "$D/cifar-good" --batch-size 8
accepts tokens-good "" -- $TK "$D/tok-good" --optimizer adamw --beta1 0.9 --beta2 0.95 --eps 1e-8 --lr-schedule cosine --warmup-steps 2 --min-lr 1e-5 --max-steps 4
accepts augment-crop-flip-env "" LOCKSTEP_AUGMENT=crop-flip -- $SYN
accepts switch-values "" LOCKSTEP_NO_DECAY_BN_BIAS=1 -- $SYN --model mlp --nesterov=true --cuda-graph=F --resume=0

if [[ $(hashes) != "$initial_hashes" ]]; then
  echo "FAIL: file contents under the work directory changed during the rows"
  failures=$((failures + 1))
fi

echo "$cases cases, $failures failed"
[[ $failures -eq 0 ]]
