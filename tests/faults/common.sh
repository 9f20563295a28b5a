# Helpers for the fault tests (sourced). Every trainer a test starts names
# $WORK in its command line (--metrics-file), which is how the helpers find
# this test's processes and no one else's.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
WORK=$(mktemp -d /tmp/lockstep-faults.XXXXXX)
MARK="--metrics-file $WORK/metrics.jsonl"
fail() { echo "FAIL: $*"; exit 1; }

# Live (non-zombie) trainer processes of this test.
live_trainers() {
  for p in $(pgrep -f -- "--metrics-file $WORK/" || true); do
    [[ $p == "$$" ]] && continue
    awk '$3 !~ /^Z/ {print $1}' "/proc/$p/stat" 2> /dev/null
  done
  return 0
}
# The pid of MPI rank $1 among this test's trainers (from its environment).
rank_pid() {
  local want=$1 p
  for p in $(live_trainers); do
    if tr '\0' '\n' < "/proc/$p/environ" 2> /dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$want"; then echo "$p"; return; fi
  done
}
# Waits until the job has started training (rank 0 printed its world line).
wait_for_training() {  # log file, seconds
  local log=$1 limit=$2 i
  for ((i = 0; i < limit * 10; i++)); do
    grep -q "^world:" "$log" 2> /dev/null && return 0
    sleep 0.1
  done
  return 1
}
now() { date +%s.%N; }
elapsed() { python3 -c "print(f'{$2 - $1:.1f}')"; }
cleanup() {
  local left
  left=$(live_trainers)
  [[ -n $left ]] && kill -9 $left 2> /dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
