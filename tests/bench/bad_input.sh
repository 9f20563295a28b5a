#!/usr/bin/env bash
# Bad input to the benchmark binaries (scripts/bench), as a table in the style
# of tests/trainer/bad_input.sh. Every row must exit 2, print exactly one line
# on stderr ("TOOL: " and text naming the flag and value), print nothing on
# stdout, and end within LIMIT seconds (a hang fails the row, never the whole
# test). The MPI tools run as MPI singletons (a world of one); two rows run
# them under mpirun -np 2, where rank 0 alone prints the line (mpirun adds its
# own banner) and every rank exits. --help must exit 0 with the usage on
# stdout. Rows run concurrently: most of a row's time is MPI start-up.
# usage: bad_input.sh bench_layers bench_allreduce bench_fusion bench_sgemm bench_gemm_small bench_overhead
#                     bench_loader
set -u
declare -A BIN=([bench_layers]=$1 [bench_allreduce]=$2 [bench_fusion]=$3 [bench_sgemm]=$4 [bench_gemm_small]=$5
                [bench_overhead]=$6 [bench_loader]=$7)
SCRATCH=$(mktemp -d)
trap 'rm -rf "$SCRATCH"' EXIT
LIMIT=30
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
names=() tools=() expects=() modes=()

# start MODE NAME TOOL EXPECTED_TEXT ARGS...: runs one row in the background.
#   MODE bad: TOOL alone; mpi: under mpirun -np 2; help: a positive --help row
start() {
  local mode=$1 name=$2 tool=$3 expect=$4; shift 4
  local i=${#names[@]} cmd=("${BIN[$tool]}")
  [[ $mode == mpi ]] && cmd=(mpirun -np 2 "${BIN[$tool]}")
  names+=("$name") tools+=("$tool") expects+=("$expect") modes+=("$mode")
  (
    timeout -k 5 "$LIMIT" "${cmd[@]}" "$@" >"$SCRATCH/$i.out" 2>"$SCRATCH/$i.err" </dev/null
    echo $? >"$SCRATCH/$i.rc"
  ) &
}
row() { start bad "$@"; }

# bench_layers
row layers-unknown-flag bench_layers "Option 'frobnicate' does not exist" --frobnicate 3
row layers-positional bench_layers "unexpected argument 'extra'" extra
row layers-missing-value bench_layers "Option 'batch-size' is missing an argument" --batch-size
row layers-unknown-model bench_layers "--model 'bogus' is unknown (known: mlp, lenet," --model bogus
row layers-text-batch bench_layers "--batch-size must be an integer from 1 to 65536, got 'abc'" --batch-size abc
row layers-zero-batch bench_layers "--batch-size must be an integer from 1 to 65536, got '0'" --batch-size 0
row layers-zero-iters bench_layers "--iters must be an integer from 1 to 1000000, got '0'" --iters 0
row layers-negative-iters bench_layers "--iters must be an integer from 1 to 1000000, got '-3'" --iters -3
row layers-zero-threads bench_layers "--threads must be an integer from 1 to 1024, got '0'" --threads 0
row layers-text-threads bench_layers "--threads must be an integer from 1 to 1024, got '2x'" --threads 2x
row layers-zero-image-size bench_layers "--image-size must be an integer from 1 to 4096, got '0'" --image-size 0
row layers-text-channels bench_layers "--channels must be an integer from 1 to 4096, got 'rgb'" --channels rgb
row layers-one-class bench_layers "--classes must be an integer from 2 to 100000, got '1'" --classes 1
row layers-huge-sample bench_layers "--image-size makes 3 x 4096 x 4096 values per sample, more than 16777216" \
  --model resnet20 --image-size 4096
row layers-huge-batch bench_layers "--batch-size 65536 of 1 x 1024 x 1024 samples is more than 2147483648" \
  --model mlp --batch-size 65536 --image-size 1024
row layers-too-small bench_layers "--model lenet: samples of shape [1, 3, 3] are too small" --model lenet --image-size 3

# bench_allreduce
SIZE="(a number, optionally with K, M or G)"
row allreduce-text-b bench_allreduce "-b must be a size from 1 byte to 64G $SIZE, got 'abc'" -b abc
row allreduce-zero-b bench_allreduce "-b must be a size from 1 byte to 64G $SIZE, got '0'" -b 0
row allreduce-unit-e bench_allreduce "-e must be a size from 1 byte to 64G $SIZE, got '4X'" -e 4X
row allreduce-huge-e bench_allreduce "-e must be a size from 1 byte to 64G $SIZE, got '1T'" -e 1T
row allreduce-text-f bench_allreduce "-f must be a number > 1, got 'abc'" -f abc
row allreduce-f-one bench_allreduce "-f must be a number > 1, got '1'" -f 1
row allreduce-f-half bench_allreduce "-f must be a number > 1, got '0.5'" -f 0.5
row allreduce-f-tiny-step bench_allreduce "-f 1.0001 makes 180228 sizes from -b to -e, more than 1000" -f 1.0001
row allreduce-text-w bench_allreduce "-w must be an integer from 0 to 1000000, got 'abc'" -w abc
row allreduce-zero-n bench_allreduce "-n must be an integer from 1 to 1000000, got '0'" -n 0
row allreduce-text-n bench_allreduce "-n must be an integer from 1 to 1000000, got '1.5'" -n 1.5
row allreduce-trailing bench_allreduce "-n needs a value" -b 4 -n
row allreduce-unknown-key bench_allreduce "unknown option '--bytes' (see --help)" --bytes 4
row allreduce-positional bench_allreduce "unexpected argument '4M' (see --help)" -b 4 4M
row allreduce-unknown-path bench_allreduce "--path must be one of mpi, ordered, lockstep, hierarchical, shm, got 'nccl'" --path nccl
row allreduce-lo-above-hi bench_allreduce "-b 1M is larger than -e 4K" -b 1M -e 4K
row allreduce-unknown-wire bench_allreduce "--wire must be one of f32, fp16, bf16, got 'fp8'" --path ordered --wire fp8
row allreduce-wire-mpi-path bench_allreduce "--wire fp16 needs --path ordered or hierarchical (the other paths are fp32)" --wire fp16
start mpi allreduce-hierarchical-one-host bench_allreduce "--path hierarchical needs the ranks grouped by host, at least 2 on each of at least 2 hosts (2 ranks on 1 host here)" --path hierarchical
start mpi allreduce-mpirun-np2 bench_allreduce "-f must be a number > 1, got '1'" -f 1

# bench_fusion
row fusion-text-reps bench_fusion "--reps must be an integer from 1 to 100000, got 'abc'" --reps abc
row fusion-zero-reps bench_fusion "--reps must be an integer from 1 to 100000, got '0'" --reps 0
row fusion-text-threshold bench_fusion "--threshold-mb must be a number of MB from 0.000001 to 1048576, got 'abc'" \
  --threshold-mb abc
row fusion-zero-threshold bench_fusion "--threshold-mb must be a number of MB from 0.000001 to 1048576, got '0'" \
  --threshold-mb 0
row fusion-text-first bench_fusion "--first-bucket-mb must be a number of MB from 0 to 1048576, got 'abc'" \
  --first-bucket-mb abc
row fusion-negative-first bench_fusion "--first-bucket-mb must be a number of MB from 0 to 1048576, got '-1'" \
  --first-bucket-mb -1
row fusion-unknown-key bench_fusion "unknown option '--rounds' (see --help)" --rounds 3
row fusion-trailing bench_fusion "--reps needs a value" --reps
start mpi fusion-mpirun-np2 bench_fusion "--reps must be an integer from 1 to 100000, got '0'" --reps 0

# bench_overhead
row overhead-unknown-key bench_overhead "unknown option '--iters' (see --help)" --iters 3
row overhead-positional bench_overhead "unexpected argument 'lenet' (see --help)" lenet
row overhead-trailing bench_overhead "--steps needs a value" --steps
row overhead-unknown-model bench_overhead "--model 'bogus' is unknown (known: mlp, lenet," --model bogus
row overhead-text-batch bench_overhead "--batch-size must be an integer from 1 to 65536, got 'abc'" --batch-size abc
row overhead-zero-steps bench_overhead "--steps must be an integer from 1 to 100000, got '0'" --steps 0
row overhead-zero-rounds bench_overhead "--rounds must be an integer from 1 to 10000, got '0'" --rounds 0
row overhead-negative-warmup bench_overhead "--warmup must be an integer from 0 to 100000, got '-1'" --warmup -1
row overhead-zero-threads bench_overhead "--threads must be an integer from 1 to 1024, got '0'" --threads 0
row overhead-huge-sample bench_overhead "--image-size 4096 makes 3 x 4096 x 4096 values per sample, more than 16777216" \
  --model resnet20 --image-size 4096
row overhead-too-small bench_overhead "--model lenet: samples of shape [1, 3, 3] are too small" --model lenet --image-size 3
start mpi overhead-mpirun-np2 bench_overhead "measures a single rank; run it as one process, not 2 ranks" --steps 1

# bench_sgemm and bench_gemm_small take no arguments.
row sgemm-flag bench_sgemm "unknown option '--size' (see --help)" --size 512
row sgemm-positional bench_sgemm "unexpected argument '512' (see --help)" 512
row gemm-small-flag bench_gemm_small "unknown option '--shape' (see --help)" --shape 16
row gemm-small-positional bench_gemm_small "unexpected argument '16' (see --help)" 16

# bench_loader
row loader-unknown-key bench_loader "unknown option '--threads' (see --help)" --threads 2
row loader-positional bench_loader "unexpected argument '4' (see --help)" 4
row loader-trailing bench_loader "--workers needs a value" --workers
row loader-zero-workers bench_loader "--workers must be an integer from 1 to 64, got '0'" --workers 1,0
row loader-text-workers bench_loader "--workers must be an integer from 1 to 64, got 'two'" --workers two
row loader-empty-workers bench_loader "--workers must list worker counts, got ''" --workers ''
row loader-zero-batch bench_loader "--batch-size must be an integer from 1 to 4096, got '0'" --batch-size 0
row loader-huge-batch bench_loader "--batch-size 4096 of 64 x 1024 x 1024 samples is more than 2^30 values" \
  --batch-size 4096 --channels 64 --image-size 1024
row loader-zero-rounds bench_loader "--rounds must be an integer from 1 to 1000, got '0'" --rounds 0

# Positive: --help (and -h) print the usage and exit 0.
for tool in bench_layers bench_allreduce bench_fusion bench_sgemm bench_gemm_small bench_overhead bench_loader; do
  start help "$tool-help" "$tool" "" --help
  start help "$tool-h" "$tool" "" -h
done

wait
failures=0
for i in "${!names[@]}"; do
  name=${names[$i]} tool=${tools[$i]} expect=${expects[$i]} mode=${modes[$i]}
  code=$(cat "$SCRATCH/$i.rc") err=$(cat "$SCRATCH/$i.err")
  ok=1
  if [[ $code -eq 124 || $code -eq 137 ]]; then
    echo "FAIL $name: still running after ${LIMIT}s (a hang)"
    ok=0
  elif [[ $mode == help ]]; then
    [[ $code -eq 0 ]] || { echo "FAIL $name: exit code $code, expected 0"; ok=0; }
    [[ -z $err ]] || { echo "FAIL $name: wrote to stderr"; ok=0; }
    grep -qi 'usage' "$SCRATCH/$i.out" || { echo "FAIL $name: no usage on stdout"; ok=0; }
  else
    # Under mpirun: mpirun's banner may follow; exactly one line is the tool's.
    ours=$(grep -c "^$tool: " "$SCRATCH/$i.err")
    lines=$(grep -c '' "$SCRATCH/$i.err")
    [[ $mode == mpi ]] && lines=$ours
    if [[ $mode == mpi ]]; then
      [[ $code -ne 0 ]] || { echo "FAIL $name: exit code 0"; ok=0; }
    else
      [[ $code -eq 2 ]] || { echo "FAIL $name: exit code $code, expected 2"; ok=0; }
    fi
    [[ $lines -eq 1 && $ours -eq 1 ]] || { echo "FAIL $name: $lines stderr lines, $ours from $tool, expected 1"; ok=0; }
    [[ $err == *"$tool: $expect"* ]] || { echo "FAIL $name: stderr lacks '$tool: $expect'"; ok=0; }
    [[ ! -s $SCRATCH/$i.out ]] || { echo "FAIL $name: wrote to stdout: $(head -c 200 "$SCRATCH/$i.out")"; ok=0; }
  fi
  if [[ $ok -eq 1 ]]; then
    echo "ok   $name: $(grep -m1 "^$tool: " "$SCRATCH/$i.err" || echo "(exit $code)")"
  else
    sed 's/^/     stderr: /' "$SCRATCH/$i.err" | head -5
    failures=$((failures + 1))
  fi
done
echo "${#names[@]} cases, $failures failed"
[[ $failures -eq 0 ]]
