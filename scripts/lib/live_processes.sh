# live_processes PATTERN: prints "process PID: COMMAND LINE" for every process
# whose command line contains PATTERN and that still runs, except this shell.
# Zombies are not listed: they run nothing (a container's init may not reap
# them). Sourced by scripts/lib/namespace_hosts.sh and tests/cluster/slurm.sh
# to check that a run left nothing behind; always returns 0 (callers run under
# set -e).

live_processes() {
  local pid state
  for pid in $(pgrep -f "$1" || true); do
    [[ $pid == "$$" ]] && continue
    state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || echo Z)
    [[ $state != Z ]] && echo "process $pid: $(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null)"
  done
  return 0
}
