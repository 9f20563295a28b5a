#!/usr/bin/env bash
# GPT-2 training throughput on the CPU, lockstep vs PyTorch 1.13, side by side.
#
# Cases (--cases, any of):
#   tiny1  gpt2-tiny (4 layers, 4 heads, 256 channels), batch 8 x 256 tokens, 1 thread
#   tiny2  the same on 2 threads
#   gpt2   gpt2 (12 layers, 12 heads, 768 channels), batch 4 x 64 tokens, 2 threads
# For each of --rounds rounds, every case runs lockstep's trainer (--benchmark
# on one fixed batch of random tokens, AdamW; its summary tokens/s leaves the
# first 5 steps out) then scripts/bench/torch_gpt2.py (the same model, batch,
# sequence length, optimizer and threads; median of timed windows after its
# warm-up steps), back to back, so both see the same machine state.
# Then, unless --scaling off, N=2 on this host: gpt2-tiny as 2 processes
# (mpirun -np 2 --oversubscribe) of 1 thread and batch 4 each, against the
# round's one process of 2 threads and batch 8 (tiny2's lockstep run, or a run
# of its own where tiny2 is not among the cases): the same global batch.
#
# Both sides run the same OpenBLAS kernels: OPENBLAS_CORETYPE is the family
# the trainer picks on this CPU (core/blas_kernels.h; a probe run asks it),
# or the caller's where set, exported to the trainer and to PyTorch (whose
# matmuls call the same libopenblas). Threads: the trainer's --threads N;
# PyTorch's torch.set_num_threads(N), OMP_NUM_THREADS=N and
# OPENBLAS_NUM_THREADS=N (its OpenBLAS has threads of its own).
#
# Prints every run, then per case the medians over rounds: tokens/s of each,
# the ratio lockstep / PyTorch, lockstep's model GFLOP/s (tokens/s x the
# trainer's model FLOPs per token: 3 x forward, attention over its causal
# half) and MFU as the trainer reports it (against the sgemm rate it measured
# at start: one OpenBLAS sgemm per compute thread at once, summed over threads
# and ranks, so over every core the run computes on), and PyTorch's model
# GFLOP/s counted the same way. Last line: JSON.
# usage: scripts/bench_gpt2.sh [--quick] [--rounds 3] [--cases "tiny1 tiny2 gpt2"] [--scaling on|off]
#          [--steps N] [--torch-steps N]
# --quick: a smoke test of every path (1 round, batch 2 x 32 tokens, a few steps; figures meaningless).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${BUILD_DIR:-$ROOT/build}"
TORCH_PY=/usr/bin/python3
ROUNDS=3 CASES="tiny1 tiny2 gpt2" SCALING=on QUICK=0 STEPS="" TORCH_STEPS=""
fail() { echo "bench_gpt2.sh: $*" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --quick) QUICK=1; shift ;;
    --rounds|--cases|--scaling|--steps|--torch-steps)
      [[ $# -ge 2 ]] || fail "$1 needs a value"
      case $1 in
        --rounds) ROUNDS=$2 ;; --cases) CASES=$2 ;; --scaling) SCALING=$2 ;;
        --steps) STEPS=$2 ;; --torch-steps) TORCH_STEPS=$2 ;;
      esac
      shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ {exit} NR > 1' "$0"; exit 0 ;;
    *) fail "unknown argument '$1' (see --help)" ;;
  esac
done
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || fail "--rounds: '$ROUNDS' is not a positive integer"
[[ $SCALING == on || $SCALING == off ]] || fail "--scaling: '$SCALING' is not on or off"
[[ -z $STEPS || ($STEPS =~ ^[0-9]+$ && $STEPS -ge 7) ]] || fail "--steps: '$STEPS' is not an integer of at least 7 (5 warm-up steps are left out)"
[[ -z $TORCH_STEPS || $TORCH_STEPS =~ ^[1-9][0-9]*$ ]] || fail "--torch-steps: '$TORCH_STEPS' is not a positive integer"
[[ -n ${CASES// /} ]] || fail "--cases: give at least one of tiny1, tiny2, gpt2"
for c in $CASES; do [[ $c == tiny1 || $c == tiny2 || $c == gpt2 ]] || fail "--cases: '$c' is not one of tiny1, tiny2, gpt2"; done
[[ -x $BUILD/trainer ]] || fail "$BUILD/trainer is not built (scripts/build.sh, or BUILD_DIR=...)"
[[ -x $TORCH_PY ]] && "$TORCH_PY" -c 'import torch' 2> /dev/null || fail "$TORCH_PY cannot import torch (Debian's python3-torch)"
if [[ $SCALING == on ]]; then command -v mpirun > /dev/null || fail "--scaling on: mpirun is not on PATH"; fi
((QUICK)) && ROUNDS=1

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# A CPU benchmark: the CPU even where --device auto would find a GPU.
export LOCKSTEP_DEVICE="${LOCKSTEP_DEVICE:-cpu}"
WORK=$(mktemp -d /tmp/lockstep-bench-gpt2.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
# AdamW as GPT-2 training runs it; the same on both sides (torch_gpt2.py's defaults).
OPT=(--optimizer adamw --lr 3e-4 --beta1 0.9 --beta2 0.95 --eps 1e-8 --weight-decay 0.1)
summary() {  # FIELDS... of the metrics file's summary record, one line
  python3 - "$WORK/m.jsonl" "$@" << 'PY'
import json, sys
s = [json.loads(l) for l in open(sys.argv[1]) if '"summary"' in l][-1]
print(*(s[k] for k in sys.argv[2:]))
PY
}

# The kernels: the family the trainer runs here (a short probe run), or the caller's.
if [[ -z ${OPENBLAS_CORETYPE:-} ]]; then
  "$BUILD/trainer" --model gpt2-tiny --benchmark --n-layer 1 --n-embd 64 --n-head 1 --seq-len 8 --batch-size 1 \
    --max-steps 6 --threads 1 --progress off --metrics-file "$WORK/m.jsonl" < /dev/null > "$WORK/probe.log" 2>&1 ||
    { tail -5 "$WORK/probe.log" >&2; fail "the probe run of the trainer failed"; }
  export OPENBLAS_CORETYPE=$(summary blas_kernels)
fi
CPU=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)
echo "machine: $CPU, $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "OpenBLAS kernels on both sides: OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE; $ROUNDS round(s)$( ((QUICK)) && echo ', --quick (figures meaningless)')"

# case -> "model batch seq_len threads"
declare -A SHAPE=([tiny1]="gpt2-tiny 8 256 1" [tiny2]="gpt2-tiny 8 256 2" [gpt2]="gpt2 4 64 2")
if ((QUICK)); then SHAPE=([tiny1]="gpt2-tiny 2 32 1" [tiny2]="gpt2-tiny 2 32 2" [gpt2]="gpt2 2 32 2"); fi
# Steps take seconds here (gpt2-tiny at 8 x 256 is ~200 GFLOP a step): few of them.
lock_steps=${STEPS:-$( ((QUICK)) && echo 7 || echo 12)}  # 5 warm-up + timed
torch_steps=${TORCH_STEPS:-$( ((QUICK)) && echo 2 || echo 6)}
torch_warm=2
torch_window=$( ((QUICK)) && echo 1 || echo 2)
((torch_steps >= torch_window)) || fail "--torch-steps: $torch_steps is fewer than one window of $torch_window steps"
echo "lockstep: $lock_steps steps (5 warm-up left out); PyTorch: $torch_warm warm-up + $torch_steps timed steps in windows of $torch_window"

RESULTS="$WORK/results"
: > "$RESULTS"
# lockstep LABEL ROUND RANKS MODEL BATCH T THREADS: one trainer run, its summary into RESULTS.
lockstep() {
  local label=$1 round=$2 ranks=$3 model=$4 batch=$5 t=$6 threads=$7 launch=()
  ((ranks > 1)) && launch=(mpirun -np "$ranks" --oversubscribe -x OPENBLAS_CORETYPE -x LOCKSTEP_DEVICE)
  rm -f "$WORK/m.jsonl"
  "${launch[@]}" "$BUILD/trainer" --model "$model" --benchmark --benchmark-input fixed --batch-size "$batch" \
    --seq-len "$t" --threads "$threads" --max-steps "$lock_steps" "${OPT[@]}" --progress off \
    --metrics-file "$WORK/m.jsonl" < /dev/null > "$WORK/run.log" 2>&1 ||
    { tail -5 "$WORK/run.log" >&2; fail "lockstep $label failed in round $round"; }
  read -r tps mfu sgemm fpt ms kern < <(summary tokens_per_sec mfu sgemm_gflops model_flops_per_token ms_per_step blas_kernels)
  echo "$label lockstep $round $tps $mfu $sgemm $fpt $ms $kern $((ranks * threads))" >> "$RESULTS"
  printf '  round %d %-7s lockstep %8.1f tok/s, %6.0f ms/step, MFU %4.1f%% of %.0f GFLOP/s sgemm (%s)\n' \
    "$round" "$label" "$tps" "$ms" "$(python3 -c "print(100 * $mfu)")" "$sgemm" "$kern"
}
# pytorch LABEL ROUND MODEL BATCH T THREADS
pytorch() {
  local label=$1 round=$2 model=$3 batch=$4 t=$5 threads=$6
  OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads "$TORCH_PY" "$ROOT/scripts/bench/torch_gpt2.py" \
    --model "$model" --batch-size "$batch" --seq-len "$t" --threads "$threads" --warmup "$torch_warm" \
    --steps "$torch_steps" --window "$torch_window" > "$WORK/torch.log" 2>&1 ||
    { tail -5 "$WORK/torch.log" >&2; fail "PyTorch $label failed in round $round"; }
  read -r tps ms kern bt < <(tail -1 "$WORK/torch.log" | python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["tokens_per_sec"], j["ms_per_step"], j["openblas_core"], j["openblas_threads"])')
  echo "$label pytorch $round $tps 0 0 0 $ms $kern $threads" >> "$RESULTS"
  printf '  round %d %-7s pytorch  %8.1f tok/s, %6.0f ms/step (OpenBLAS %s, %s threads)\n' "$round" "$label" "$tps" "$ms" "$kern" "$bt"
}

for ((r = 1; r <= ROUNDS; ++r)); do
  for c in $CASES; do
    read -r model batch t threads <<< "${SHAPE[$c]}"
    lockstep "$c" "$r" 1 "$model" "$batch" "$t" "$threads"
    pytorch "$c" "$r" "$model" "$batch" "$t" "$threads"
  done
  if [[ $SCALING == on ]]; then
    read -r model batch t _ <<< "${SHAPE[tiny2]}"
    [[ " $CASES " == *" tiny2 "* ]] || lockstep tiny2 "$r" 1 "$model" "$batch" "$t" 2
    lockstep np2 "$r" 2 "$model" "$((batch / 2 > 0 ? batch / 2 : 1))" "$t" 1
  fi
done

echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$RESULTS" "$CASES" "$SCALING" "$CPU" "$OPENBLAS_CORETYPE" "$ROUNDS" "$QUICK" "${SHAPE[tiny1]}|${SHAPE[tiny2]}|${SHAPE[gpt2]}" << 'PY'
import json, statistics, sys
path, cases, scaling, cpu, core, rounds, quick, shapes = sys.argv[1:9]
shape = dict(zip(("tiny1", "tiny2", "gpt2"), (s.split() for s in shapes.split("|"))))
runs = {}
for line in open(path):
    label, side, _, tps, mfu, sgemm, fpt, ms, _kern, _cores = line.split()
    runs.setdefault((label, side), []).append(dict(tps=float(tps), mfu=float(mfu), sgemm=float(sgemm),
                                                    fpt=float(fpt), ms=float(ms)))
med = lambda rs, k: statistics.median(r[k] for r in rs)
rows = []
print(f"\n| case | model, batch x T, threads | lockstep tok/s | PyTorch tok/s | ratio | lockstep model GFLOP/s | trainer's MFU (of its sgemm GFLOP/s) | PyTorch model GFLOP/s | rounds lockstep / PyTorch |")
print("|---|---|---:|---:|---:|---:|---:|---:|---|")
for c in cases.split():
    ours, theirs = runs[(c, "lockstep")], runs[(c, "pytorch")]
    o, t, fpt = med(ours, "tps"), med(theirs, "tps"), ours[0]["fpt"]
    model, b, T, th = shape[c]
    row = {"case": c, "model": model, "batch": int(b), "seq_len": int(T), "threads": int(th),
           "lockstep_tok_s": round(o, 1), "pytorch_tok_s": round(t, 1), "ratio": round(o / t, 3),
           "lockstep_gflops": round(o * fpt / 1e9, 1), "mfu": round(med(ours, "mfu"), 4),
           "sgemm_gflops": round(med(ours, "sgemm"), 1), "pytorch_gflops": round(t * fpt / 1e9, 1),
           "model_flops_per_token": fpt, "lockstep_ms_per_step": round(med(ours, "ms"), 1),
           "pytorch_ms_per_step": round(med(theirs, "ms"), 1),
           "lockstep_runs": [round(r["tps"], 1) for r in ours], "pytorch_runs": [round(r["tps"], 1) for r in theirs]}
    rows.append(row)
    print(f"| {c} | {model}, {b} x {T}, {th} | {o:,.0f} | {t:,.0f} | {o / t:.2f}x | {row['lockstep_gflops']:.1f} | "
          f"{100 * row['mfu']:.1f}% (of {row['sgemm_gflops']:.0f}) | {row['pytorch_gflops']:.1f} | "
          f"{', '.join(f'{v:.0f}' for v in row['lockstep_runs'])} / {', '.join(f'{v:.0f}' for v in row['pytorch_runs'])} |")
out = {"bench": "gpt2", "machine": cpu, "openblas_coretype": core, "rounds": int(rounds), "quick": quick == "1",
       "results": rows}
if scaling == "on":
    one, two = runs[("tiny2", "lockstep")], runs[("np2", "lockstep")]
    a, b = med(one, "tps"), med(two, "tps")
    out["scaling"] = {"one_process_2_threads_tok_s": round(a, 1), "two_processes_1_thread_tok_s": round(b, 1),
                      "ratio": round(b / a, 3), "two_processes_mfu": round(med(two, "mfu"), 4),
                      "one_process_mfu": round(med(one, "mfu"), 4),
                      "two_processes_sgemm_gflops": round(med(two, "sgemm"), 1),
                      "one_process_runs": [round(r["tps"], 1) for r in one],
                      "two_process_runs": [round(r["tps"], 1) for r in two]}
    s = out["scaling"]
    print(f"\nN=2 on this host, gpt2-tiny, global batch {shape['tiny2'][1]} x {shape['tiny2'][2]}: "
          f"2 processes x 1 thread {b:,.0f} tok/s (MFU {100 * s['two_processes_mfu']:.1f}% of "
          f"{s['two_processes_sgemm_gflops']:.0f}), 1 process x 2 threads {a:,.0f} tok/s: {b / a:.2f}x "
          f"(rounds {', '.join(f'{v:.0f}' for v in s['two_process_runs'])} / {', '.join(f'{v:.0f}' for v in s['one_process_runs'])})")
print(json.dumps(out))
PY
