#!/usr/bin/env bash
# A SLURM cluster on this machine, for real: a munge key and munged, then
# slurmctld and slurmd on this host with a generated slurm.conf (this node's
# CPUs and memory, ports and state directories of the test's own). Then two
# batch jobs, submitted with `sbatch --wait`:
#   1. lockstep-run inside the allocation (which launches srun --mpi=pmix);
#   2. plain mpirun inside the allocation.
# Both must complete (exit 0) and their output must show 2 ranks and the final
# test accuracy. The daemons are stopped by their pid files at the end (also on
# failure) and the test checks that no daemon or job process is left.
# Then the shipped examples, scripts/slurm/train.sbatch and
# train-multinode.sbatch, submitted as a user would (directives overridden for
# this 1-node, GPU-less cluster), must train too. Last, a task of a running
# lockstep-run job is killed with SIGKILL: srun (--kill-on-bad-exit=1) must
# end the step naming the task, the job must fail, and every trainer must be
# gone within 30 s.
# usage: slurm.sh LOCKSTEP_RUN TRAINER SOURCE_DIR
set -euo pipefail
RUN=$(readlink -f "$1") TRAINER=$(readlink -f "$2") SRC=$(readlink -f "$3")
if [[ $(id -u) != 0 ]]; then echo "skipped: a local slurmctld/slurmd as the test runs them needs root"; exit 77; fi
for tool in munged slurmctld slurmd sbatch squeue srun mpirun ss; do
  command -v "$tool" > /dev/null || { echo "FAIL: $tool is missing (scripts/setup.sh installs it)"; exit 1; }
done

WORK=$(mktemp -d /tmp/lockstep-slurm.XXXXXX)
chmod 755 "$WORK"
mkdir -p "$WORK"/{munge,state,spool,log,jobs}
HOST=$(hostname -s)  # slurmctld only runs where SlurmctldHost names this host
NODE=lsnode$$        # the compute node's name of this run (slurmd -N); NodeAddr is loopback

free_port() {  # a TCP port nothing listens on
  local p
  while :; do
    p=$(( 20000 + RANDOM % 30000 ))
    ss -ltn | awk '{print $4}' | grep -q ":$p\$" || { echo "$p"; return; }
  done
}
CTLD_PORT=$(free_port)
SLURMD_PORT=$(free_port)
while [[ $SLURMD_PORT == "$CTLD_PORT" ]]; do SLURMD_PORT=$(free_port); done

source "$SRC/scripts/lib/live_processes.sh"
leftovers() { live_processes "$WORK"; }  # processes started for this run all carry $WORK in their command line

stop_daemon() {  # by its pid file: TERM, wait up to 10 s, then KILL
  local pidfile=$1 pid
  [[ -f $pidfile ]] || return 0
  pid=$(cat "$pidfile")
  kill "$pid" 2> /dev/null || return 0
  for _ in $(seq 100); do
    [[ -d /proc/$pid && $(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) != Z ]] || return 0
    sleep 0.1
  done
  kill -9 "$pid" 2> /dev/null
}

teardown() {
  local rc=$?
  set +e
  # Jobs still queued or running (a failed run) are cancelled while the controller is up.
  [[ -f $WORK/slurmctld.pid ]] && timeout 10 scancel --quiet --user=root 2> /dev/null
  stop_daemon "$WORK/slurmd.pid"
  stop_daemon "$WORK/slurmctld.pid"
  stop_daemon "$WORK/munge/munged.pid"
  local left
  for _ in $(seq 50); do
    left=$(leftovers)
    [[ -z $left ]] && break
    sleep 0.1
  done
  if [[ -n $left ]]; then
    echo "FAIL: left behind after teardown:"; echo "$left" | sed 's/^/  /'
    rc=1
  else
    echo "ok: nothing left behind (munged, slurmctld, slurmd, job processes)"
  fi
  if [[ $rc != 0 ]]; then
    for f in "$WORK"/log/* "$WORK"/jobs/*.out; do [[ -f $f ]] && { echo "--- $f"; tail -30 "$f"; }; done
  fi
  rm -rf "$WORK"
  exit $rc
}
trap teardown EXIT

# --- munge ---
dd if=/dev/urandom of="$WORK/munge/munge.key" bs=1024 count=1 status=none
chmod 700 "$WORK/munge"
chmod 400 "$WORK/munge/munge.key"
munged --force --key-file "$WORK/munge/munge.key" --socket "$WORK/munge/munge.sock" \
  --pid-file "$WORK/munge/munged.pid" --log-file "$WORK/munge/munged.log" --seed-file "$WORK/munge/munged.seed"

# --- slurm.conf: this node, its CPUs and memory (less 1 GiB, so slurmd never drains it) ---
CPUS=$(nproc)
MEM_MB=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024 ))
cat > "$WORK/slurm.conf" << EOF
ClusterName=lockstep-test
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$WORK/munge/munge.sock
CredType=cred/munge
StateSaveLocation=$WORK/state
SlurmdSpoolDir=$WORK/spool
SlurmctldPidFile=$WORK/slurmctld.pid
SlurmdPidFile=$WORK/slurmd.pid
SlurmctldLogFile=$WORK/log/slurmctld.log
SlurmdLogFile=$WORK/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM_MB State=UNKNOWN
PartitionName=lockstep Nodes=$NODE Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
export SLURM_CONF=$WORK/slurm.conf
slurmctld -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF" -N "$NODE"
# The daemons fork into the background and write their pid files a moment later.
deadline=$((SECONDS + 10))
until [[ -s $WORK/slurmctld.pid && -s $WORK/slurmd.pid ]]; do
  [[ $SECONDS -ge $deadline ]] && { echo "FAIL: slurmctld/slurmd wrote no pid file in 10 s"; exit 1; }
  sleep 0.1
done
alive() { kill -0 "$(cat "$1")" 2> /dev/null; }
deadline=$((SECONDS + 30))
while :; do  # the node registered and idle (every client call bounded: they retry for minutes)
  alive "$WORK/slurmctld.pid" || { echo "FAIL: slurmctld exited"; exit 1; }
  alive "$WORK/slurmd.pid" || { echo "FAIL: slurmd exited"; exit 1; }
  timeout 5 sinfo -h -N -o "%T" 2> /dev/null | grep -q idle && break
  [[ $SECONDS -ge $deadline ]] && { echo "FAIL: the node did not come up idle in 30 s"; timeout 5 sinfo -N 2>&1; exit 1; }
  sleep 0.2
done
echo "slurm: controller and node $NODE up on ports $CTLD_PORT/$SLURMD_PORT ($CPUS CPUs, $MEM_MB MB)"

# --- the jobs ---
ARGS="--model lenet --global-batch-size 64 --max-steps 30 --threads 1 --progress off"
cat > "$WORK/jobs/lockstep_run.sbatch" << EOF
#!/bin/bash
#SBATCH --job-name=lockstep-run
#SBATCH --ntasks=2
#SBATCH --output=$WORK/jobs/%x-%j.out
set -e
$RUN --dry-run $TRAINER $ARGS
$RUN $TRAINER $ARGS
EOF
cat > "$WORK/jobs/mpirun.sbatch" << EOF
#!/bin/bash
#SBATCH --job-name=mpirun
#SBATCH --ntasks=2
#SBATCH --output=$WORK/jobs/%x-%j.out
set -e
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun -np \$SLURM_NTASKS $TRAINER $ARGS
EOF

fail=0
for job in lockstep_run mpirun; do
  start=$SECONDS
  if ! timeout 120 sbatch --wait --quiet "$WORK/jobs/$job.sbatch"; then
    echo "FAIL: sbatch $job.sbatch did not complete with exit 0"; fail=1
  fi
  out=$(ls "$WORK"/jobs/*.out | grep "/${job//_/-}-" || true)
  echo "--- job $job ($((SECONDS - start)) s): $out"
  [[ -n $out ]] && grep -E "^srun|world:|test\)|Average" "$out"
  if [[ -z $out ]] || ! grep -q "world: 2 ranks on 1 node" "$out" || ! grep -qE "\(test\) acc: [0-9.]+%" "$out"; then
    echo "FAIL: job $job output does not show 2 ranks and the final test accuracy"; fail=1
  fi
done
# The shipped examples, as a user submits them from the repository root.
EXAMPLE_ARGS=(--gpus-per-node=0 --nodes=1 --ntasks-per-node=2 --cpus-per-task=1 --time=5)
for example in train train-multinode; do
  start=$SECONDS
  out=$WORK/jobs/example-$example.out
  if ! (cd "$SRC" && BUILD_DIR=$(dirname "$TRAINER") LOCKSTEP_CHECKPOINT_DIR=$WORK/ckpt-$example \
          timeout 120 sbatch --wait --quiet "${EXAMPLE_ARGS[@]}" --output="$out" \
          "scripts/slurm/$example.sbatch" $ARGS); then
    echo "FAIL: sbatch scripts/slurm/$example.sbatch did not complete with exit 0"; fail=1
  fi
  echo "--- scripts/slurm/$example.sbatch ($((SECONDS - start)) s)"
  grep -E "world:|test\)" "$out" || true
  grep -q "world: 2 ranks on 1 node" "$out" && grep -qE "\(test\) acc: [0-9.]+%" "$out" ||
    { echo "FAIL: scripts/slurm/$example.sbatch output does not show 2 ranks and the test accuracy"; fail=1; }
done
# A task killed mid-training under lockstep-run -> srun --kill-on-bad-exit=1:
# the step must end, naming the task, every trainer gone within 30 s, and the
# job must fail.
cat > "$WORK/jobs/dead_task.sbatch" << EOF
#!/bin/bash
#SBATCH --job-name=dead-task
#SBATCH --ntasks=2
#SBATCH --output=$WORK/jobs/%x-%j.out
$RUN $TRAINER --model lenet --epochs 5 --no-eval --threads 1 --progress off --metrics-file $WORK/jobs/dead-task.jsonl
EOF
live_tasks() {
  for p in $(pgrep -f -- "--metrics-file $WORK/jobs/dead-task" || true); do
    awk '$3 !~ /^Z/ {print $1}' "/proc/$p/stat" 2> /dev/null
  done
}
jobid=$(timeout 10 sbatch --parsable "$WORK/jobs/dead_task.sbatch")
out=$WORK/jobs/dead-task-$jobid.out
for _ in $(seq 600); do grep -q "^world:" "$out" 2> /dev/null && break; sleep 0.1; done
victim=""
for p in $(live_tasks); do
  tr '\0' '\n' < "/proc/$p/environ" 2> /dev/null | grep -qx "SLURM_PROCID=1" && victim=$p
done
if [[ -z $victim ]]; then
  echo "FAIL: dead-task job: training did not start or task 1 not found"; cat "$out" 2> /dev/null; fail=1
else
  t0=$(date +%s.%N)
  kill -9 "$victim"
  gone="" tasks_gone=""
  while [[ -z $gone ]] && python3 -c "import sys; sys.exit(0 if $(date +%s.%N) - $t0 < 30 else 1)"; do
    [[ -z $tasks_gone && -z $(live_tasks) ]] && tasks_gone=$(date +%s.%N)
    [[ -n $tasks_gone && -z $(timeout 5 squeue -h -j "$jobid" 2> /dev/null) ]] && gone=$(date +%s.%N)
    sleep 0.2
  done
  grep -E "task 1|error" "$out" || true
  job_exit=$(timeout 5 scontrol show job "$jobid" -o 2> /dev/null | grep -o " ExitCode=[0-9:]*" | cut -d= -f2)
  if [[ -z $gone ]]; then
    echo "FAIL: dead-task job: tasks or the job still there 30 s after the kill" \
         "(trainers gone after: ${tasks_gone:+$(python3 -c "print(f'{$tasks_gone - $t0:.1f}')") s}${tasks_gone:-never})"
    fail=1
    for p in $(live_tasks); do ps -o pid=,stat=,args= -p "$p" | cut -c1-150; done
    timeout 5 squeue -j "$jobid"
    timeout 5 scancel "$jobid" 2> /dev/null
  elif ! grep -q "task 1: Killed" "$out"; then
    echo "FAIL: dead-task job: the killed task was not named"; cat "$out"; fail=1
  elif [[ -z $job_exit || $job_exit == 0:0 ]]; then
    echo "FAIL: dead-task job: job exit code '$job_exit', expected non-zero"; fail=1
  else
    echo "dead task under srun: task 1 killed, step and job ended (job exit $job_exit): every trainer and srun gone after" \
         "$(python3 -c "print(f'{$tasks_gone - $t0:.1f}')") s, job out of the queue after" \
         "$(python3 -c "print(f'{$gone - $t0:.1f}')") s (gate 30 s)"
  fi
fi
grep -q "^srun --mpi=pmix " "$(ls "$WORK"/jobs/lockstep-run-*.out)" ||
  { echo "FAIL: lockstep-run inside the allocation did not launch with srun --mpi=pmix"; fail=1; }
[[ $fail == 0 ]] && echo "ok: sbatch with lockstep-run (srun --mpi=pmix), with mpirun, the two shipped examples, and a killed task"
exit $fail
