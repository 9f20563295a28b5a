#!/usr/bin/env bash
# lockstep-run's command line: the exact mpirun/srun command --dry-run prints
# for -np, -H, --hostfile, --network-interface and SLURM allocations; clear
# errors (exit 2, one line, within seconds, nothing launched) for malformed
# hostfiles, unknown hosts, unreachable hosts and impossible requests; and
# exit codes passed through from a real local job.
# usage: launch_cli.sh LOCKSTEP_RUN TRAINER
set -uo pipefail
RUN=$1 TRAINER=$(readlink -f "$2")
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail=0
ROOTFLAG=""
[[ $(id -u) == 0 ]] && ROOTFLAG=" --allow-run-as-root"
SSH="--mca plm_rsh_args '-o BatchMode=yes -o ConnectTimeout=5'"
# A clean environment, so the forwarded variables are the ones each case sets.
clean() { env -i PATH="$PATH" HOME="${HOME:-/root}" "$@"; }

expect_output() {  # NAME EXPECTED COMMAND...
  local name=$1 expected=$2
  shift 2
  local got
  got=$("$@" 2>&1)
  local rc=$?
  if [[ $rc == 0 && "$got" == "$expected" ]]; then
    echo "ok: $name"
  else
    echo "FAIL: $name (exit $rc)"
    echo "  expected: $expected"
    echo "  got:      $got"
    fail=1
  fi
}

# expect_error NAME PATTERN COMMAND...: exit 2, one line matching PATTERN, < 10 s, no mpirun output.
expect_error() {
  local name=$1 pattern=$2
  shift 2
  local start=$SECONDS got rc
  got=$("$@" 2>&1)
  rc=$?
  local took=$((SECONDS - start))
  local lines
  lines=$(printf '%s\n' "$got" | wc -l)
  if [[ $rc == 2 && $lines == 1 && $took -lt 10 ]] && grep -qE -- "$pattern" <<<"$got"; then
    echo "ok: $name (${took}s): $got"
  else
    echo "FAIL: $name: exit $rc after ${took}s, $lines line(s), wanted /$pattern/:"
    printf '%s\n' "$got" | head -20 | sed 's/^/  /'
    fail=1
  fi
}

# --- --dry-run: the exact command ---
expect_output "-np on this host" \
  "mpirun -np 4 --map-by slot --bind-to none$ROOTFLAG $SSH $TRAINER --model lenet" \
  clean "$RUN" --dry-run -np 4 "$TRAINER" --model lenet
expect_output "-H with slots, forwarded variables, network interface" \
  "mpirun -np 4 -H a:2,b:2 --map-by slot --bind-to none$ROOTFLAG $SSH --mca btl_tcp_if_include eth1 --mca oob_tcp_if_include eth1 -x NCCL_SOCKET_IFNAME=eth1 -x LOCKSTEP_FUSION_THRESHOLD_MB -x NCCL_DEBUG -x OMPI_MCA_btl $TRAINER --epochs 1" \
  clean LOCKSTEP_FUSION_THRESHOLD_MB=4 NCCL_DEBUG=INFO OMPI_MCA_btl=self,tcp NCCL_SOCKET_IFNAME=eth9 \
  "$RUN" --dry-run -H a:2,b:2 --network-interface eth1 "$TRAINER" --epochs 1
expect_output "-H without slot counts, fewer processes than slots" \
  "mpirun -np 2 -H a:1,b:1,c:1 --map-by slot --bind-to none$ROOTFLAG $SSH $TRAINER" \
  clean "$RUN" --dry-run -np 2 -H a,b,c "$TRAINER"
cat > "$WORK/hosts" <<'EOF'
# two nodes, two slots each
node-a slots=2

node-b  slots=2 max_slots=4   # comment after the entry
EOF
expect_output "--hostfile (comments, blank lines, max_slots), -np from its slots, ssh port and key, '--'" \
  "mpirun -np 4 --hostfile $WORK/hosts --map-by slot --bind-to none$ROOTFLAG --mca plm_rsh_args '-o BatchMode=yes -o ConnectTimeout=5 -p 2222 -i $WORK/hosts -F /x/y' --bind-to core $TRAINER --lr 0.1" \
  clean "$RUN" --dry-run --hostfile "$WORK/hosts" --ssh-port 2222 --ssh-identity-file "$WORK/hosts" \
  --ssh-options "-F /x/y" --mpirun-args "--bind-to core" -- "$TRAINER" --lr 0.1
expect_output "inside a SLURM allocation: srun --mpi=pmix" \
  "srun --mpi=pmix --kill-on-bad-exit=1 -n 2 $TRAINER --model mlp" \
  clean SLURM_JOB_ID=42 "$RUN" --dry-run -np 2 "$TRAINER" --model mlp
expect_output "inside a SLURM allocation, the allocation's task count" \
  "NCCL_SOCKET_IFNAME=ib0 OMPI_MCA_btl_tcp_if_include=ib0 OMPI_MCA_oob_tcp_if_include=ib0 srun --mpi=pmix --kill-on-bad-exit=1 $TRAINER" \
  clean SLURM_JOB_ID=42 "$RUN" --dry-run --network-interface ib0 "$TRAINER"
expect_output "inside a SLURM allocation with --launcher mpirun" \
  "mpirun --map-by slot --bind-to none$ROOTFLAG $SSH $TRAINER" \
  clean SLURM_JOB_ID=42 "$RUN" --dry-run --launcher mpirun "$TRAINER"
(cd "$(dirname "$TRAINER")" && expect_output "relative command path made absolute" \
  "mpirun -np 1 --map-by slot --bind-to none$ROOTFLAG $SSH $TRAINER" \
  clean "$RUN" --dry-run -np 1 "./$(basename "$TRAINER")") || fail=1

# --- bad input: one line, exit 2, seconds ---
printf 'node-a slots=2\n\n# fine so far\nnode-b slots=two\n' > "$WORK/bad_slots"
expect_error "hostfile: bad slot count" "bad_slots:4: slots 'two' is not a whole number" \
  "$RUN" --hostfile "$WORK/bad_slots" "$TRAINER"
printf 'node-a slots=2\nnode-b cpus=2\n' > "$WORK/bad_key"
expect_error "hostfile: unknown key" "bad_key:2: unknown key 'cpus'" "$RUN" --hostfile "$WORK/bad_key" "$TRAINER"
printf 'node-a slots=2\nnode-b 2\n' > "$WORK/bad_word"
expect_error "hostfile: not key=value" "bad_word:2: '2' is not of the form key=value" \
  "$RUN" --hostfile "$WORK/bad_word" "$TRAINER"
printf 'node-a\nnode-b\nnode-a slots=3\n' > "$WORK/dup"
expect_error "hostfile: host listed twice" "dup:3: host 'node-a' is already listed" \
  "$RUN" --hostfile "$WORK/dup" "$TRAINER"
printf '# nothing\n\n' > "$WORK/empty"
expect_error "hostfile: no hosts" "empty lists no hosts" "$RUN" --hostfile "$WORK/empty" "$TRAINER"
expect_error "hostfile: missing" "--hostfile: $WORK/missing is not a file" "$RUN" --hostfile "$WORK/missing" "$TRAINER"
expect_error "-H: bad slot count" "-H entry 2 \('b:0'\): slot count '0'" "$RUN" -H a:2,b:0 "$TRAINER"
expect_error "-np beyond the slots" "-np 5 asks for more processes than the hosts have slots \(4\)" \
  "$RUN" -np 5 -H a:2,b:2 "$TRAINER"
expect_error "-np not a number" "-np: 'four' is not a whole number" "$RUN" -np four "$TRAINER"
expect_error "no -np, no hosts" "-np is needed" clean "$RUN" "$TRAINER"
expect_error "--max-restarts negative" "--max-restarts: '-1' is not a whole number from 0 to 1000" \
  "$RUN" -np 2 --max-restarts -1 "$TRAINER" --checkpoint-dir "$WORK/ck"
expect_error "--min-np above -np" "--min-np 3 is more than -np 2" "$RUN" -np 2 --min-np 3 "$TRAINER"
expect_error "--restart-backoff not a number" "--restart-backoff: 'soon' is not a number of seconds" \
  "$RUN" -np 2 --restart-backoff soon "$TRAINER"
expect_error "--max-restarts without a checkpoint directory" "--max-restarts: the command names no --checkpoint-dir" \
  "$RUN" -np 2 --max-restarts 1 "$TRAINER" --model lenet
expect_error "no command" "no command to launch" "$RUN" -np 2
expect_error "command not executable" "command: $WORK/hosts is not an executable file" "$RUN" -np 2 "$WORK/hosts"
expect_error "command not on PATH" "command: 'no-such-trainer' is not on PATH" "$RUN" -np 2 no-such-trainer
expect_error "unknown option" "Option 'bogus' does not exist" "$RUN" --bogus -np 2 "$TRAINER"
expect_error "bad launcher" "--launcher: 'pbs' is not one of auto, mpirun, srun" "$RUN" --launcher pbs -np 2 "$TRAINER"
expect_error "srun outside SLURM" "--launcher srun: not inside a SLURM allocation" \
  clean "$RUN" --launcher srun -np 2 "$TRAINER"
expect_error "hosts with srun in SLURM" "drop -H/--hostfile" clean SLURM_JOB_ID=42 "$RUN" -H a:2 "$TRAINER"
expect_error "unknown host" "host 'no-such-host.invalid' .*does not resolve" \
  "$RUN" -H localhost:1,no-such-host.invalid:1 "$TRAINER"
# A non-routable address: no ssh server answers; the error comes from the 3 s probe, not from mpirun.
expect_error "unreachable host" "host '10.255.255.1' .*(no answer on ssh port 22|no ssh server answered|cannot reach ssh port 22)" \
  "$RUN" -H 10.255.255.1:2 "$TRAINER"

# --- a real local job: exit codes pass through ---
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ARGS=(--model mlp --dataset synthetic --synthetic-samples 512 --batch-size 32 --max-steps 4 --no-eval --threads 1
      --progress off)
if "$RUN" -np 2 "$TRAINER" "${ARGS[@]}" > "$WORK/ok.log" 2>&1 && grep -q "world: 2 ranks on 1 node" "$WORK/ok.log"; then
  echo "ok: 2-rank job through lockstep-run exits 0"
else
  echo "FAIL: 2-rank job through lockstep-run"; sed 's/^/  /' "$WORK/ok.log"; fail=1
fi
"$RUN" -np 2 "$TRAINER" "${ARGS[@]}" --lr -1 > "$WORK/bad.log" 2>&1
rc=$?
if [[ $rc == 2 ]] && grep -q "error: --lr: -1 must be positive" "$WORK/bad.log"; then
  echo "ok: the trainer's exit code 2 comes back through lockstep-run"
else
  echo "FAIL: trainer's bad-input exit came back as $rc"; sed 's/^/  /' "$WORK/bad.log"; fail=1
fi
exit $fail
