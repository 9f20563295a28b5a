#!/usr/bin/env bash
# Bad input to the trainer: every case must exit with code 2, print exactly one
# line on stderr ("error: ...") naming the input, print nothing on stdout, and
# create or change no output file.
# usage: cli_errors.sh path/to/trainer
set -u
TRAINER=$1
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/empty" "$WORK/bad-data"
# A data directory whose training images file is truncated.
printf '\x00\x00\x08\x03\x00\x00\x00\x05\x00\x00\x00\x1c\x00\x00\x00\x1c\x01\x02' > "$WORK/bad-data/train-images-idx3-ubyte"
printf '\x00\x00\x08\x01\x00\x00\x00\x05\x01\x02\x03\x04\x05' > "$WORK/bad-data/train-labels-idx1-ubyte"
echo "precious" > "$WORK/precious.safetensors"
SYN="--dataset synthetic --synthetic-samples 256 --batch-size 32"
failures=0
cases=0

# check NAME EXPECTED_SUBSTRING [ENV=VALUE ...] -- ARGS...
check() {
  local name=$1 expect=$2; shift 2
  local envs=()
  while [[ $# -gt 0 && $1 != "--" ]]; do envs+=("$1"); shift; done
  shift
  cases=$((cases + 1))
  local out err code
  out=$(env "${envs[@]}" "$TRAINER" --metrics-file "$WORK/m-$name.jsonl" "$@" 2>"$WORK/stderr")
  code=$?
  err=$(cat "$WORK/stderr")
  local lines
  lines=$(printf '%s\n' "$err" | grep -c .)
  local ok=1
  [[ $code -eq 2 ]] || { echo "FAIL $name: exit code $code, expected 2"; ok=0; }
  [[ $lines -eq 1 ]] || { echo "FAIL $name: $lines stderr lines"; ok=0; }
  [[ $err == "error: "* ]] || { echo "FAIL $name: stderr does not start with 'error: '"; ok=0; }
  [[ $err == *"$expect"* ]] || { echo "FAIL $name: stderr lacks '$expect'"; ok=0; }
  [[ -z $out ]] || { echo "FAIL $name: wrote to stdout"; ok=0; }
  [[ ! -e "$WORK/m-$name.jsonl" ]] || { echo "FAIL $name: created the metrics file"; ok=0; }
  [[ $(cat "$WORK/precious.safetensors") == "precious" ]] || { echo "FAIL $name: overwrote a file"; ok=0; }
  if [[ $ok -eq 1 ]]; then echo "ok   $name: $err"; else echo "     stderr: $err"; failures=$((failures + 1)); fi
}

check unknown-model "--model: 'resnet9000' is unknown" -- --model resnet9000
check zero-batch "--batch-size: 0 must be positive" -- --batch-size 0
check negative-batch "--batch-size: -5 must be positive" -- --batch-size -5
check text-batch "--batch-size: 'abc' is not an integer" -- --batch-size abc
check zero-epochs "--epochs: 0 must be positive" -- --epochs 0
check negative-lr "--lr: -1 must be positive" -- --lr -1
check nan-lr "--lr: 'nan' is not a finite number" -- --lr nan
check big-momentum "--momentum: 1.5 must be in [0, 1)" -- --momentum 1.5
check negative-threads "--threads: -1 must not be negative" -- --threads -1
check missing-data-dir "--data-dir: $WORK/nope is not a directory" -- --data-dir "$WORK/nope"
check empty-data-dir "missing train-images-idx3-ubyte" -- --data-dir "$WORK/empty"
check truncated-data "$WORK/bad-data/train-images-idx3-ubyte: file is truncated" -- --data-dir "$WORK/bad-data"
check unknown-dataset "--dataset: 'imagenet' is not one of" -- --dataset imagenet
check unknown-optimizer "--optimizer: 'lamb' is not one of sgd, adam, adamw" -- --optimizer lamb
check unknown-flag "Option 'frobnicate' does not exist" -- --frobnicate 3
check positional "unexpected argument 'extra'" -- extra
check cuda-device "--device cuda" -- --device cuda
check env-batch "LOCKSTEP_BATCH_SIZE=zero: --batch-size: 'zero' is not an integer" LOCKSTEP_BATCH_SIZE=zero -- --dataset synthetic
check env-combination "--checkpoint-every needs --checkpoint-dir (set by LOCKSTEP_CHECKPOINT_EVERY)" LOCKSTEP_CHECKPOINT_EVERY=5 -- $SYN
check env-model "LOCKSTEP_MODEL=nope: --model: 'nope' is unknown" LOCKSTEP_MODEL=nope --
check metrics-dir "--metrics-file: directory $WORK/no/such does not exist" -- --metrics-file "$WORK/no/such/m.jsonl"
check weights-to-dir "--save-weights: $WORK is a directory" -- $SYN --save-weights "$WORK"
check missing-weights "--load-weights: $WORK/none.safetensors is not a file" -- $SYN --load-weights "$WORK/none.safetensors"
check garbage-weights "$WORK/precious.safetensors: header length" -- $SYN --load-weights "$WORK/precious.safetensors"
check huge-global-batch "global batch 100000 is larger than the data set" -- $SYN --global-batch-size 100000
check bad-shape "--synthetic-shape: '1,28' must be three positive extents" -- --dataset synthetic --synthetic-shape 1,28
check step-schedule "--lr-schedule step needs --lr-step-epochs > 0" -- --lr-schedule step
check bad-log-level "--log-level: 'loud' is not one of" -- --log-level loud
check bad-target "--target-accuracy: 1.5 must be in [0, 1]" -- --target-accuracy 1.5

echo "$cases cases, $failures failed"
[[ $failures -eq 0 ]]
