# Several hosts on this machine, for real (sourced by tests/cluster/namespace_hosts.sh
# and scripts/bench_hosts.sh; needs root): network namespaces joined by veth
# pairs to a bridge, each with its own host name (a UTS namespace, as Open MPI
# tells hosts apart by name) and its own sshd on its address, root key-based ssh.
#
#   nshosts_up COUNT WORK   brings up COUNT hosts; WORK is the caller's scratch
#                           directory (keys, sshd configs, logs). Sets
#                           SUB (10.213.X, a /24 free on this host; host i is
#                           $SUB.$((i + 1)), the bridge $SUB.254), NS[i]
#                           (namespace = host name), VETH[i] (the bridge side
#                           of host i's link; host i's own side is eth0 in
#                           NS[i]), BR and SSH_CONFIG (a client config of the
#                           run's own matching only $SUB.*: key, no host checks).
#   nshosts_down            stops every process in the namespaces and deletes
#                           namespaces, bridge and veths; safe to call twice and
#                           after a partial nshosts_up.
#   nshosts_leftovers       prints what is still there (namespaces, bridge,
#                           veths, live processes whose command line names WORK).
# Every name carries a per-run id, so runs do not collide.

source "$(dirname "${BASH_SOURCE[0]}")/live_processes.sh"

nshosts_up() {
  local count=$1 i cand
  NSH_WORK=$2
  SUB="" NS=() VETH=()
  for i in $(seq 0 60); do
    cand=$(( ($$ + i * 37) % 250 + 1 ))
    if ! ip -4 addr show | grep -q "inet 10\.213\.$cand\."; then SUB=10.213.$cand; break; fi
  done
  [[ -n $SUB ]] || { echo "nshosts_up: no free 10.213.X.0/24 subnet" >&2; return 1; }
  local id=${SUB##*.}$(( $$ % 1000 ))
  BR=lsbr$id
  local letters=(a b c d e f g h)
  ((count >= 1 && count <= ${#letters[@]})) || { echo "nshosts_up: 1 to ${#letters[@]} hosts, not $count" >&2; return 1; }
  for ((i = 0; i < count; ++i)); do
    NS+=("lsh$id${letters[$i]}")
    VETH+=("lsv$id${letters[$i]}")
  done
  ip link add "$BR" type bridge || return 1
  ip addr add "$SUB.254/24" dev "$BR" && ip link set "$BR" up || return 1
  ssh-keygen -q -t ed25519 -N '' -f "$NSH_WORK/client_key" && ssh-keygen -q -t ed25519 -N '' -f "$NSH_WORK/host_key" ||
    return 1
  cp "$NSH_WORK/client_key.pub" "$NSH_WORK/authorized_keys"
  mkdir -p /run/sshd  # sshd's privilege-separation directory
  for ((i = 0; i < count; ++i)); do
    local ns=${NS[$i]} addr=$SUB.$((i + 1))
    ip netns add "$ns" || return 1
    ip link add "${VETH[$i]}" type veth peer name eth0 netns "$ns" || return 1
    ip link set "${VETH[$i]}" master "$BR" up
    ip -n "$ns" addr add "$addr/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    cat > "$NSH_WORK/sshd-$ns.conf" << EOF
ListenAddress $addr
HostKey $NSH_WORK/host_key
PidFile $NSH_WORK/sshd-$ns.pid
AuthorizedKeysFile $NSH_WORK/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
StrictModes no
UsePAM no
EOF
    ip netns exec "$ns" unshare --uts sh -c \
      "hostname $ns; exec /usr/sbin/sshd -f $NSH_WORK/sshd-$ns.conf -E $NSH_WORK/sshd-$ns.log" || return 1
  done
  SSH_CONFIG=$NSH_WORK/ssh_config
  cat > "$SSH_CONFIG" << EOF
Host $SUB.*
  IdentityFile $NSH_WORK/client_key
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  LogLevel ERROR
EOF
  local up
  for _ in $(seq 50); do  # every sshd listening
    up=1
    for ((i = 0; i < count; ++i)); do
      ssh -F "$SSH_CONFIG" -o BatchMode=yes -o ConnectTimeout=2 "$SUB.$((i + 1))" true 2> /dev/null || { up=0; break; }
    done
    [[ $up == 1 ]] && return 0
    sleep 0.1
  done
  echo "nshosts_up: the hosts' sshd did not answer" >&2
  return 1
}

nshosts_leftovers() {
  local ns v
  for ns in "${NS[@]}"; do ip netns list | grep -qw "$ns" && echo "namespace $ns"; done
  [[ -n ${BR:-} ]] && ip link show "$BR" > /dev/null 2>&1 && echo "bridge $BR"
  for v in "${VETH[@]}"; do ip link show "$v" > /dev/null 2>&1 && echo "veth $v"; done
  # Live processes started for this run (sshd by its config path, trainers by
  # their output paths).
  [[ -n ${NSH_WORK:-} ]] || return 0
  live_processes "$NSH_WORK"
}

nshosts_down() {  # every step may find its object gone already: none may fail (callers run under set -e)
  local ns pid v
  for ns in "${NS[@]}"; do  # sshd first (by pid file), then anything else still in the namespace
    [[ -f $NSH_WORK/sshd-$ns.pid ]] && { kill "$(cat "$NSH_WORK/sshd-$ns.pid")" 2> /dev/null || true; }
    for pid in $(ip netns pids "$ns" 2> /dev/null); do kill "$pid" 2> /dev/null || true; done
  done
  sleep 0.5
  for ns in "${NS[@]}"; do
    for pid in $(ip netns pids "$ns" 2> /dev/null); do kill -9 "$pid" 2> /dev/null || true; done
    ip netns del "$ns" 2> /dev/null || true
  done
  [[ -n ${BR:-} ]] && { ip link del "$BR" 2> /dev/null || true; }
  for v in "${VETH[@]}"; do ip link del "$v" 2> /dev/null || true; done
  return 0
}
