#!/usr/bin/env bash
# Two builds of the trainer side by side: for each of --rounds rounds, every
# VARIANT runs once, in the order given, with the same arguments (a change's
# before and after, on a machine too noisy for runs an hour apart). A VARIANT
# is NAME=TRAINER[:EXTRA ARGS], e.g. "before=/tmp/old/trainer" or
# "zero1=build/trainer:--zero-stage 1". Training runs are `--benchmark`
# (synthetic data) with the arguments after `--`; the figure is the metrics
# file's images/s and exposed-communication fraction.
#
# Where: --ranks N on this host (default 2), or --hosts H (2-8) network-
# namespace hosts with --per-host L ranks each (scripts/lib/namespace_hosts.sh,
# root) and --rate (each host's sending rate: Nmbit, Ngbit or none). With
# more ranks than cores the runs are oversubscribed, and say so.
# Prints every run, then per variant the median images/s, its ratio to the
# first variant and the median exposed fraction. Last line: JSON.
# usage: scripts/bench_ab.sh --variant NAME=TRAINER[:ARGS] --variant ... [--rounds 3]
#          [--ranks 2 | --hosts 2 --per-host 2 --rate 1gbit] -- TRAINER ARGS...
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VARIANTS=() ROUNDS=3 RANKS=2 HOSTS=0 PER_HOST=2 RATE=none
while [[ $# -gt 0 ]]; do
  case $1 in
    --variant) VARIANTS+=("$2"); shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --ranks) RANKS=$2; shift 2 ;;
    --hosts) HOSTS=$2; shift 2 ;;
    --per-host) PER_HOST=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "bench_ab.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
ARGS=("$@")
fail() { echo "bench_ab.sh: $*" >&2; exit 2; }
((${#VARIANTS[@]} >= 2)) || fail "--variant: give at least two"
for v in "${VARIANTS[@]}"; do
  [[ $v =~ ^[A-Za-z0-9_.-]+=[^:]+(:.*)?$ ]] || fail "--variant: '$v' is not NAME=TRAINER[:ARGS]"
  t=${v#*=}; t=${t%%:*}
  [[ -x $t ]] || fail "--variant $v: '$t' is not an executable"
done
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || fail "--rounds: '$ROUNDS' is not a positive integer"
[[ $RANKS =~ ^[1-9][0-9]*$ ]] || fail "--ranks: '$RANKS' is not a positive integer"
[[ $HOSTS == 0 || $HOSTS =~ ^[2-8]$ ]] || fail "--hosts: '$HOSTS' is not 2 to 8"
[[ $PER_HOST =~ ^[1-8]$ ]] || fail "--per-host: '$PER_HOST' is not 1 to 8"
[[ $RATE == none || $RATE =~ ^[0-9]+[mg]bit$ ]] || fail "--rate: '$RATE' is not none, Nmbit or Ngbit"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# A CPU benchmark: the CPU even where --device auto would find a GPU (a
# command-line --device still wins).
export LOCKSTEP_DEVICE="${LOCKSTEP_DEVICE:-cpu}"
WORK=$(mktemp -d /tmp/lockstep-bench-ab.XXXXXX)
chmod 755 "$WORK"
if ((HOSTS > 0)); then
  [[ $(id -u) == 0 ]] || fail "--hosts: network namespaces, tc and sshd need root"
  RUNNER="${BUILD_DIR:-$ROOT/build}/lockstep-run"
  [[ -x $RUNNER ]] || fail "$RUNNER not built (scripts/build.sh)"
  source "$ROOT/scripts/lib/namespace_hosts.sh"
  source "$ROOT/scripts/lib/shaped_hosts.sh"
  trap 'nshosts_down; rm -rf "$WORK"' EXIT
  nshosts_up "$HOSTS" "$WORK"
  bench_set_rate "$RATE"
  LIST=$(for ((i = 1; i <= HOSTS; ++i)); do echo -n "$SUB.$i:$PER_HOST,"; done)
  LAUNCH=("$RUNNER" -H "${LIST%,}" --ssh-options "-F $SSH_CONFIG")
  RANKS=$((HOSTS * PER_HOST))
  WHERE="$HOSTS namespace hosts x $PER_HOST ranks, rate $RATE"
else
  trap 'rm -rf "$WORK"' EXIT
  LAUNCH=(mpirun -np "$RANKS" --oversubscribe)
  WHERE="$RANKS ranks on this host"
fi
((RANKS > $(nproc))) && WHERE+=" (oversubscribed: $RANKS ranks on $(nproc) cores)"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; $WHERE; $ROUNDS rounds"
echo "trainer arguments: --benchmark ${ARGS[*]}"

results=""
for ((r = 1; r <= ROUNDS; ++r)); do
  for v in "${VARIANTS[@]}"; do
    name=${v%%=*} rest=${v#*=}
    trainer=${rest%%:*} extra=""
    [[ $rest == *:* ]] && extra=${rest#*:}
    rm -f "$WORK/m.jsonl"
    # shellcheck disable=SC2086  # extra holds several arguments
    "${LAUNCH[@]}" "$trainer" --benchmark --progress off "${ARGS[@]}" $extra --metrics-file "$WORK/m.jsonl" \
      < /dev/null > "$WORK/run.log" 2>&1 || { tail -5 "$WORK/run.log" >&2; fail "variant $name failed in round $r"; }
    line=$(python3 -c 'import json,sys; s=[json.loads(l) for l in open(sys.argv[1])][-1]; print(s["images_per_sec"], s.get("exposed_comm_fraction", 0))' "$WORK/m.jsonl")
    python3 -c 'import sys; print(f"  round {sys.argv[1]}, {sys.argv[2]}: {float(sys.argv[3]):.1f} img/s, exposed {100 * float(sys.argv[4]):.1f}%")' \
      "$r" "$name" $line
    results+="$name $line"$'\n'
  done
done
python3 - "$ROUNDS" "$WHERE" "${VARIANTS[@]}" <<PY
import json, statistics, sys
rounds, where, variants = int(sys.argv[1]), sys.argv[2], [v.split("=", 1)[0] for v in sys.argv[3:]]
runs = {}
for line in """$results""".strip().splitlines():
    name, ips, exposed = line.split()
    runs.setdefault(name, []).append((float(ips), float(exposed)))
med = {n: statistics.median(i for i, _ in runs[n]) for n in variants}
print()
print("| variant | img/s (median) | / " + variants[0] + " | exposed (median) | per round |")
print("|---|---:|---:|---:|---|")
out = {"bench": "ab", "where": where, "rounds": rounds, "variants": []}
for n in variants:
    ex = statistics.median(e for _, e in runs[n])
    print(f"| {n} | {med[n]:.1f} | {med[n] / med[variants[0]]:.3f} | {100 * ex:.1f}% | {', '.join(f'{i:.1f}' for i, _ in runs[n])} |")
    out["variants"].append({"name": n, "img_s": med[n], "exposed": ex, "rounds": [i for i, _ in runs[n]]})
print(json.dumps(out))
PY
