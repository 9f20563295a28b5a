# Shared by the benchmarks across namespace hosts (scripts/bench_hosts.sh,
# scripts/bench_hierarchical.sh; sourced after scripts/lib/namespace_hosts.sh):
#
#   bench_model_shape MODEL  prints "batch image-size channels classes": the
#                            per-rank batch and synthetic input of each model
#                            in those benchmarks; fails naming MODEL otherwise.
#   bench_set_rate RATE      caps every host's sending rate (NS from
#                            nshosts_up) with a token-bucket filter: Nmbit or
#                            Ngbit, or none for the bare veth.

bench_model_shape() {
  case $1 in
    lenet | keras-cnn | convnet | mlp) echo "128 28 1 10" ;;
    resnet20 | resnet32 | resnet56) echo "64 32 3 10" ;;
    resnet50) echo "16 64 3 1000" ;;
    *) echo "$(basename "$0"): --models: no shape for '$1'" >&2; return 2 ;;
  esac
}

bench_set_rate() {
  local ns burst
  for ns in "${NS[@]}"; do
    ip netns exec "$ns" tc qdisc del dev eth0 root 2> /dev/null || true
    [[ $1 == none ]] && continue
    # The bucket holds 4 ms at the rate (at least 256 KB): enough for the
    # kernel's timer granularity and 64 KB segments, small against a step.
    burst=$(python3 -c "import re,sys; n,u=re.fullmatch(r'(\d+)([mg])bit',sys.argv[1]).groups(); \
print(max(262144, int(int(n)*(1e6 if u=='m' else 1e9)/8*0.004)))" "$1")
    ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "$1" burst "$burst" latency 100ms
  done
}
