#!/usr/bin/env bash
#===- scripts/cluster.sh - An emulated cluster of network namespaces -------===#
#
# Nodes are network namespaces (each with its own hostname), joined by veth
# pairs to a Linux bridge in a "switch" namespace; every link is shaped by tbf
# in both directions. `run` starts mpirun inside the first node with a
# hostfile of the nodes' addresses and an rsh agent that enters a node's
# namespace, so Open MPI launches across the nodes as across the hosts of a
# real cluster (a daemon per node, TCP between nodes). mpirun gets TCP
# keepalives on its daemons' connections (5 s idle, 3 probes 5 s apart): it
# then gives up a node whose link is cut within 15-20 s and ends the job
# (a link down for less than 10 s goes unnoticed), where Open MPI's
# defaults (300 s, 9 probes 20 s apart) leave it waiting
# for 8 minutes. docs/cluster.md.
#
# `run NP -- oasr-run ... --max-restarts=N` restarts a failed job: the
# restarts are oasr-run's, in one place. This script then starts oasr-run
# as the launcher of `--np NP` (outside the nodes) with $OASR_MPIRUN naming
# this script's `run`, which it calls for each attempt as
# `run --pin=... -np NP oasr-run ARGS...` (docs/runtime.md, "Errors and
# failures").
#
#   scripts/cluster.sh up N [--rate=1gbit|none] [--subnet=10.77.0.0/24]
#   scripts/cluster.sh run NP [--pin=core|none] [--plain] -- COMMAND [ARG...]
#   scripts/cluster.sh loss P
#   scripts/cluster.sh status
#   scripts/cluster.sh down
#
# --name=NAME (or $OASR_CLUSTER) before or after the command selects one of
# several clusters (default "oasr"). Everything created is named after it:
# namespaces NAME-sw and NAME-n0..NAME-n<N-1>, the state directory
# $OASR_CLUSTER_STATE/NAME (default /run/oasr-cluster/NAME). Interfaces are
# created inside those namespaces only; the root namespace is not touched.
set -uo pipefail

prog=cluster.sh
die() { echo "$prog: error: $*" >&2; exit 2; }
usage() {
  cat <<'EOF'
usage: scripts/cluster.sh [--name=NAME] COMMAND ...
  up N [--rate=RATE] [--subnet=A.B.C.D/L]  N nodes (1..64), each link shaped
                                           to RATE (tc units: 1gbit, 200mbit;
                                           "none": unshaped); default 1gbit,
                                           10.77.0.0/24
  run NP [--pin=core|none] [--plain] -- COMMAND...
                                           mpirun -np NP across the nodes
                                           (round-robin), rank r pinned to
                                           the r-th CPU modulo the CPUs here;
                                           --plain: without this script's
                                           allreduce choices (as a user's
                                           own mpirun would launch);
                                           `-- oasr-run ... --max-restarts=N`
                                           restarts a failed job from its
                                           newest checkpoint
  loss P                                   every node drops a fraction P
                                           (0..1) of the packets it sends
                                           (iptables' statistic match: netem
                                           is not in every kernel); 0 stops
  status                                   nodes, addresses, rate, bytes sent
  down                                     remove everything `up` created
EOF
}

name=${OASR_CLUSTER:-oasr}
args=()
seen_dashes=0
for a in "$@"; do
  # Up to `run`'s "--" (or -np): the command after it keeps its own --name=.
  if [ "$seen_dashes" = 0 ] && [[ "$a" == --name=* ]]; then
    name=${a#--name=}
    continue
  fi
  [ "$a" = -- ] || [ "$a" = -np ] && seen_dashes=1
  args+=("$a")
done
set -- "${args[@]+"${args[@]}"}"
[[ "$name" =~ ^[a-z][a-z0-9]{0,11}$ ]] ||
  die "--name=$name: a cluster name is a lower-case letter followed by at most 11 letters or digits"
statedir=${OASR_CLUSTER_STATE:-/run/oasr-cluster}/$name
sw=$name-sw

[ $# -ge 1 ] || { usage >&2; exit 2; }
cmd=$1; shift
case "$cmd" in
  up|down|status|run|loss) ;;
  -h|--help|help) usage; exit 0 ;;
  *) usage >&2; die "unknown command '$cmd' (expected up, down, status, run or loss)" ;;
esac

# Namespaces are made and entered with CAP_SYS_ADMIN; say so up front.
need_netns() {
  command -v ip >/dev/null || die "'ip' (iproute2) not found"
  if [ "$(id -u)" != 0 ]; then
    die "$cmd needs root (network namespaces): run it as root or with sudo"
  fi
}

# The cluster's namespaces that exist now, by exact name.
existing_namespaces() {
  ip netns list 2>/dev/null | awk '{print $1}' |
    grep -E "^$name-(sw|n[0-9]+)\$" || true
}

ip_to_int() {
  local IFS=.; set -- $1
  echo $(( ($1 << 24) | ($2 << 16) | ($3 << 8) | $4 ))
}
int_to_ip() {
  local v=$1
  echo "$(( (v >> 24) & 255 )).$(( (v >> 16) & 255 )).$(( (v >> 8) & 255 )).$(( v & 255 ))"
}

# The allowed CPUs of this process, one per line ("0-3,6" expanded).
cpu_list() {
  local list
  list=$(taskset -cp $$ 2>/dev/null | sed 's/.*: *//')
  [ -n "$list" ] || list="0-$(( $(nproc) - 1 ))"
  local IFS=,
  for r in $list; do
    if [[ "$r" == *-* ]]; then seq "${r%-*}" "${r#*-}"; else echo "$r"; fi
  done
}

load_state() {
  [ -f "$statedir/config" ] || return 1
  # shellcheck disable=SC1091
  . "$statedir/config"
}

# Everything `up` made, by name: processes still in the namespaces (ranks,
# daemons of an interrupted run), the namespaces (their interfaces go with
# them) and the state directory.
teardown() {
  local ns pids
  for ns in $(existing_namespaces); do
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    if [ -n "$pids" ]; then
      # shellcheck disable=SC2086
      kill -TERM $pids 2>/dev/null || true
      sleep 0.5
      pids=$(ip netns pids "$ns" 2>/dev/null || true)
      # shellcheck disable=SC2086
      [ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true
    fi
    ip netns del "$ns" 2>/dev/null || true
  done
  rm -rf "$statedir"
  rmdir "$(dirname "$statedir")" 2>/dev/null || true
  [ -z "$(existing_namespaces)" ]
}

# Serializes up/down/status of one cluster (two `up`s at once would race on
# the same names).
lock() {
  mkdir -p "$(dirname "$statedir")" || die "cannot create $(dirname "$statedir")"
  exec 9>"$(dirname "$statedir")/.$name.lock"
  flock 9
}

# The cluster is up exactly as configured: every namespace, the bridge and
# each node's address.
healthy() {
  load_state || return 1
  ip netns exec "$sw" true 2>/dev/null || return 1
  local i
  for (( i = 0; i < NODES; i++ )); do
    ip -n "$name-n$i" -4 -o addr show dev eth0 2>/dev/null |
      grep -q " ${IPS[$i]}/" || return 1
  done
  # The files `run` passes to mpirun (a cluster made by an older
  # cluster.sh lacks the allreduce rules: `up` makes it again).
  [ -x "$statedir/agent" ] && [ -f "$statedir/coll-rules" ] || return 1
  [ "$(existing_namespaces | wc -l)" -eq $(( NODES + 1 )) ]
}

cmd_up() {
  local n="" rate=1gbit subnet=10.77.0.0/24 a
  for a in "$@"; do
    case "$a" in
      --rate=*) rate=${a#--rate=} ;;
      --subnet=*) subnet=${a#--subnet=} ;;
      -*) die "up: unknown option '$a' (expected --rate=RATE, --subnet=A.B.C.D/L)" ;;
      *) [ -z "$n" ] || die "up: one node count expected, got '$n' and '$a'"
         n=$a ;;
    esac
  done
  [ -n "$n" ] || die "up: missing node count (scripts/cluster.sh up N)"
  [[ "$n" =~ ^[0-9]+$ ]] && (( 10#$n >= 1 && 10#$n <= 64 )) ||
    die "up: node count '$n' is not a number from 1 to 64"
  n=$(( 10#$n ))
  [[ "$rate" == none || "$rate" =~ ^[0-9]+(\.[0-9]+)?([kmgt]?bit|[kmgt]?bps)$ ]] ||
    die "up: --rate=$rate: expected a tc rate such as 1gbit, 200mbit, 100mbps, or 'none'"
  [[ "$subnet" =~ ^([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})/([0-9]{1,2})$ ]] ||
    die "up: --subnet=$subnet: expected an IPv4 network A.B.C.D/L"
  local o len=${BASH_REMATCH[5]}
  for o in 1 2 3 4; do
    (( BASH_REMATCH[o] <= 255 )) || die "up: --subnet=$subnet: octet ${BASH_REMATCH[o]} > 255"
  done
  (( len >= 8 && len <= 30 )) || die "up: --subnet=$subnet: prefix length must be 8..30"
  local size=$(( 1 << (32 - len) ))
  (( n <= size - 2 )) || die "up: --subnet=$subnet has $(( size - 2 )) host address(es), $n node(s) asked"
  local net=$(( $(ip_to_int "${subnet%/*}") & ~(size - 1) & 0xffffffff ))
  subnet="$(int_to_ip $net)/$len"
  need_netns
  lock

  local ips=() i
  for (( i = 0; i < n; i++ )); do ips+=("$(int_to_ip $(( net + 1 + i )))"); done
  if healthy && [ "$NODES" = "$n" ] && [ "$RATE" = "$rate" ] &&
     [ "$SUBNET" = "$subnet" ]; then
    echo "$prog: cluster $name already up: $n node(s), rate $rate, $subnet"
    return 0
  fi
  if [ -n "$(existing_namespaces)" ] || [ -d "$statedir" ]; then
    echo "$prog: replacing the existing cluster $name"
    teardown || die "could not remove the existing cluster $name"
  fi
  mkdir -p "$statedir" || die "cannot create $statedir"

  # A failure half way leaves nothing behind.
  trap 'teardown; exit 1' INT TERM
  fail() { echo "$prog: error: $*" >&2; teardown; exit 1; }

  # tbf: the bucket holds 0.2 ms at the rate, at least 24000 B, and the
  # queue 20 ms; GSO packets are capped at 16 KiB on every veth. A real
  # link never sends faster than its rate; tbf sends a full bucket at veth
  # speed after the link idles, so each call of a training step's
  # allreduces (after its compute stretch) got its first bucket free. The
  # bucket must hold a whole GSO packet (tbf cuts a larger one into
  # MTU-sized packets in software, and with a 64 KiB bucket beside 64 KiB
  # GSO packets ResNet-18's compute took 838-884 ms a step against 546),
  # so the packets are made small instead. With 64 KiB GSO packets and an
  # 80 KiB bucket, 2-node allreduces after 20 ms of compute took 0.26 ms
  # for 64 KiB and 1.98 ms for 256 KiB, where the rate (8.4 ns/B) gives
  # 0.55 and 2.2: an allreduce model fitted to a plan's 0.2-0.8 MB groups
  # took beta 17 % under the link's and predicted one 2 MB group 10 % fast.
  # With 16 KiB packets and 24000 B: 0.68 and 2.49 ms, on the line
  # alpha + beta * bytes from 64 KiB to 2 MiB within 7 %, and compute
  # beside the allreduce as fast (docs/cluster.md, "The bucket").
  local burst=24000 bits gso=16384
  if [ "$rate" != none ]; then
    bits=$(tc_rate_bits "$rate") || fail "up: --rate=$rate: not understood"
    (( bits / 8 / 5000 > burst )) && burst=$(( bits / 8 / 5000 ))
  fi

  ip netns add "$sw" || fail "ip netns add $sw failed"
  ip -n "$sw" link set lo up || fail "lo up in $sw"
  ip -n "$sw" link add br0 type bridge || fail "bridge in $sw"
  ip -n "$sw" link set br0 up || fail "bridge up in $sw"
  for (( i = 0; i < n; i++ )); do
    local node=$name-n$i
    ip netns add "$node" || fail "ip netns add $node failed"
    ip -n "$node" link set lo up || fail "lo up in $node"
    # Both ends are made in the switch namespace and one is moved: neither
    # ever exists in the root namespace.
    ip -n "$sw" link add "p$i" type veth peer name eth0 netns "$node" ||
      fail "veth pair for $node"
    ip -n "$sw" link set "p$i" gso_max_size "$gso" || fail "GSO size of p$i"
    ip -n "$node" link set eth0 gso_max_size "$gso" || fail "GSO size of $node"
    ip -n "$sw" link set "p$i" master br0 up || fail "port p$i"
    ip -n "$node" addr add "${ips[$i]}/$len" dev eth0 || fail "address of $node"
    ip -n "$node" link set eth0 up || fail "eth0 up in $node"
    # TCP keeps its window over the idle forward pass (docs/cluster.md,
    # "Slow start after idle"): a restart costs a real link's microsecond
    # round trips nothing, but here tbf's queue makes the round trip
    # milliseconds.
    ip netns exec "$node" sysctl -qw net.ipv4.tcp_slow_start_after_idle=0 ||
      fail "tcp_slow_start_after_idle in $node"
    if [ "$rate" != none ]; then
      ip netns exec "$node" tc qdisc replace dev eth0 root tbf rate "$rate" \
        burst "$burst" latency 20ms || fail "tbf on $node eth0"
      ip netns exec "$sw" tc qdisc replace dev "p$i" root tbf rate "$rate" \
        burst "$burst" latency 20ms || fail "tbf on $sw p$i"
    fi
  done

  {
    echo "NODES=$n"
    echo "RATE=$rate"
    echo "SUBNET=$subnet"
    echo "IPS=(${ips[*]})"
  } >"$statedir/config"
  for (( i = 0; i < n; i++ )); do echo "${ips[$i]} slots=1"; done >"$statedir/hostfile"
  # The rsh agent: Open MPI calls it as `AGENT [OPTIONS] HOST COMMAND...`
  # to start its daemon on HOST; it enters that node's namespace and its own
  # UTS namespace named after the node.
  {
    echo '#!/bin/sh'
    echo '# Generated by scripts/cluster.sh: Open MPI rsh agent for cluster '"$name"
    echo 'while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do shift; done'
    echo 'host=$1; shift'
    echo 'case "$host" in'
    for (( i = 0; i < n; i++ )); do echo "  ${ips[$i]}) node=$name-n$i ;;"; done
    echo "  *) echo \"cluster $name agent: no node has address '\$host'\" >&2; exit 255 ;;"
    echo 'esac'
    echo 'exec ip netns exec "$node" unshare --uts sh -c '\''hostname "$0" && exec sh -c "$1"'\'' "$node" "$*"'
  } >"$statedir/agent"
  chmod +x "$statedir/agent"
  # Open MPI's allreduce algorithm between 2 ranks (coll/tuned's dynamic
  # rules; collective 2 is allreduce): recursive doubling, each rank sending
  # its whole buffer to the other at once, moves M bytes each way at the
  # link's rate. The fixed choice for large messages (ring, Rabenseifner)
  # reached only half of it in about half the calls on these links
  # (docs/cluster.md). From 3 ranks up, algorithm 0: Open MPI's own choice.
  # The non-blocking allreduce (libnbc; the communication thread's sleep
  # priority) is set on the command line below: Rabenseifner (3) at every
  # size; libnbc's own choice between 2 ranks, binomial (a reduce and then a
  # broadcast), moved the data one way at a time.
  {
    echo '1       # collectives: allreduce (cluster.sh)'
    echo '2       # collective id: allreduce'
    echo '2       # communicator sizes'
    echo '2       # 2 ranks'
    echo '1       # message sizes'
    echo '0 3 0 0 # from 0 bytes: recursive doubling'
    echo '3       # 3 ranks and more'
    echo '1       # message sizes'
    echo '0 0 0 0 # from 0 bytes: Open MPI decides'
  } >"$statedir/coll-rules"

  # Every node reaches every other one through the switch.
  # Every node reaches every other one through the switch: a TCP connection
  # to a closed port is refused by a reachable node (no ping needed).
  for (( i = 1; i < n; i++ )); do
    reachable "$name-n0" "${ips[$i]}" ||
      fail "$name-n0 cannot reach $name-n$i (${ips[$i]})"
  done
  trap - INT TERM
  echo "$prog: cluster $name up: $n node(s) ($name-n0..$name-n$(( n - 1 )), ${ips[0]}..${ips[$(( n - 1 ))]}), links $rate, switch $sw"
}

# NODE reaches ADDRESS: a connection to TCP port 9 (discard, nothing
# listens) is refused rather than timed out.
reachable() {
  local out
  out=$(ip netns exec "$1" timeout 3 bash -c "exec 3<>/dev/tcp/$2/9" 2>&1)
  [ $? -eq 0 ] || [[ "$out" == *refused* ]]
}

# A tc rate in bit/s (tc's units: bit, kbit, mbit, gbit, tbit; bps, kbps,
# ... are bytes per second).
tc_rate_bits() {
  [[ "$1" =~ ^([0-9]+)(\.[0-9]+)?([kmgt]?)(bit|bps)$ ]] || return 1
  local v=${BASH_REMATCH[1]} mult=1
  case "${BASH_REMATCH[3]}" in
    k) mult=1000 ;; m) mult=1000000 ;; g) mult=1000000000 ;; t) mult=1000000000000 ;;
  esac
  [ "${BASH_REMATCH[4]}" = bps ] && mult=$(( mult * 8 ))
  echo $(( v * mult ))
}

cmd_down() {
  [ $# -eq 0 ] || die "down: unexpected argument '$1'"
  need_netns
  lock
  if [ -z "$(existing_namespaces)" ] && [ ! -d "$statedir" ]; then
    echo "$prog: cluster $name is not up; nothing to remove"
    rm -f "$(dirname "$statedir")/.$name.lock"
    rmdir "$(dirname "$statedir")" 2>/dev/null || true
    return 0
  fi
  teardown || die "could not remove every namespace of cluster $name: $(existing_namespaces | tr '\n' ' ')"
  # The lock file last (held until this process exits; a waiting `up` of the
  # same name still holds its open descriptor).
  rm -f "$(dirname "$statedir")/.$name.lock"
  rmdir "$(dirname "$statedir")" 2>/dev/null || true
  echo "$prog: cluster $name removed"
}

cmd_loss() {
  [ $# -eq 1 ] || die "loss: expected one fraction of packets to drop (0..1)"
  local p=$1
  [[ "$p" =~ ^(0(\.[0-9]+)?|1(\.0*)?|\.[0-9]+)$ ]] ||
    die "loss: '$p': expected a fraction of packets between 0 and 1"
  load_state || die "loss: cluster $name is not up (scripts/cluster.sh up N first)"
  need_netns
  command -v iptables >/dev/null ||
    die "loss: 'iptables' not found (Debian's iptables package; scripts/setup.sh installs it)"
  local i node
  for (( i = 0; i < NODES; i++ )); do
    node=$name-n$i
    # One rule of ours per node: replaced, or removed for 0.
    ip netns exec "$node" iptables -F OUTPUT ||
      die "loss: iptables does not work in $node's namespace"
    if [ "$p" != 0 ] && ! [[ "$p" =~ ^0?\.0*$ ]]; then
      ip netns exec "$node" iptables -A OUTPUT -o eth0 -m statistic \
        --mode random --probability "$p" -j DROP ||
        die "loss: cannot add the drop rule in $node's namespace"
    fi
  done
  echo "$prog: cluster $name: every node drops $p of the packets it sends"
}

cmd_status() {
  [ $# -eq 0 ] || die "status: unexpected argument '$1'"
  need_netns
  if ! load_state; then
    if [ -n "$(existing_namespaces)" ]; then
      echo "cluster $name: incomplete (namespaces without state: $(existing_namespaces | tr '\n' ' ')); run 'down' or 'up'"
      return 1
    fi
    echo "cluster $name: not up"
    return 3
  fi
  if ! healthy; then
    echo "cluster $name: incomplete (expected $NODES node(s)); run 'down' or 'up' again"
    return 1
  fi
  echo "cluster $name: $NODES node(s), links $RATE, subnet $SUBNET, switch $sw, state $statedir"
  local i node tx rx
  for (( i = 0; i < NODES; i++ )); do
    node=$name-n$i
    tx=$(ip netns exec "$node" cat /sys/class/net/eth0/statistics/tx_bytes)
    rx=$(ip netns exec "$node" cat /sys/class/net/eth0/statistics/rx_bytes)
    echo "  $node ${IPS[$i]} tx_bytes=$tx rx_bytes=$rx"
  done
}

cmd_run() {
  local np="" pin=core plain=
  while [ $# -gt 0 ]; do
    case "$1" in
      --) shift; break ;;
      # How oasr-run's --max-restarts launcher calls $OASR_MPIRUN (below):
      # `-np NP COMMAND...`.
      -np) [ $# -ge 2 ] || die "run: -np needs a rank count"
           [ -z "$np" ] || die "run: two rank counts, '$np' and -np $2"
           np=$2; shift 2; break ;;
      --pin=core|--pin=none) pin=${1#--pin=} ;;
      --plain) plain=1 ;;
      --pin=*) die "run: --pin=${1#--pin=}: expected core or none" ;;
      -*) die "run: unknown option '$1' (usage: run NP [--pin=core|none] [--plain] -- COMMAND...)" ;;
      *) [ -z "$np" ] || die "run: expected '--' before the command, got '$1' (usage: run NP -- COMMAND...)"
         np=$1 ;;
    esac
    shift
  done
  [ -n "$np" ] || die "run: missing the rank count (usage: run NP -- COMMAND...)"
  [[ "$np" =~ ^[0-9]+$ ]] && (( 10#$np >= 1 )) ||
    die "run: rank count '$np' is not a positive number"
  [ $# -ge 1 ] || die "run: no command after '--' (usage: run NP -- COMMAND...)"
  local a restarts="" self=""
  for a in "$@"; do
    case "$a" in
      --max-restarts|--max-restarts=*|-max-restarts|-max-restarts=*)
        restarts=$a
        [ "$(basename "$1")" = oasr-run ] ||
          die "run: $a: the command must be oasr-run itself (its launcher restarts the job), not '$1'"
        self=$(realpath "$0")
        [[ "$self" != *" "* ]] ||
          die "run: $a: the path $self has a space (\$OASR_MPIRUN is split at spaces)" ;;
    esac
  done
  load_state || die "run: cluster $name is not up (scripts/cluster.sh up N first)"
  need_netns
  healthy || die "run: cluster $name is incomplete; run 'scripts/cluster.sh up $NODES' again"
  command -v mpirun >/dev/null || die "run: mpirun not found"

  # --max-restarts: oasr-run restarts the job, as the launcher of its --np;
  # it runs each attempt through this script's `run` ($OASR_MPIRUN, words
  # split at spaces), whose command then no longer has the option.
  if [ -n "$restarts" ]; then
    export OASR_MPIRUN="$self --name=$name run --pin=$pin${plain:+ --plain}"
    exec "$1" --np "$np" "${@:2}"
  fi

  local cpus
  cpus=$(cpu_list | tr '\n' ' ')
  local launch=()
  if [ "$pin" = core ]; then
    # mpirun's own binding is per node: every node would bind its first rank
    # to core 0. The nodes share this host's CPUs, so rank r takes the r-th.
    launch=(sh -c 'n=0; for c in $OASR_CLUSTER_CPUS; do n=$((n + 1)); done
      i=$(( OMPI_COMM_WORLD_RANK % n )); k=0
      for c in $OASR_CLUSTER_CPUS; do [ $k -eq $i ] && break; k=$((k + 1)); done
      exec taskset -c "$c" "$@"' oasr-pin)
  fi
  local root=()
  [ "$(id -u)" = 0 ] && root=(--allow-run-as-root)
  # The allreduce choices for a network link (coll-rules above); --plain
  # leaves them to oasr-run, which sets the same ones itself across hosts.
  local coll=(--mca coll_tuned_use_dynamic_rules 1
    --mca coll_tuned_dynamic_rules_filename "$statedir/coll-rules"
    --mca coll_libnbc_iallreduce_algorithm 3)
  [ -n "$plain" ] && coll=()
  export OASR_CLUSTER_CPUS="$cpus" OASR_CLUSTER_NAME="$name"
  # oasr-run's failure reports (the step, the newest checkpoint, the
  # --resume command) go to a file that this launcher prints once the job
  # has ended: mpirun may end before it forwards a loaded rank's last line.
  # A launcher above this one (oasr-run --max-restarts) that named the file
  # prints it itself.
  local report="" status=0 pid
  if [ -z "${OASR_REPORT_FILE:-}" ]; then
    report=$statedir/report-$$
    rm -f "$report"
    export OASR_REPORT_FILE=$report
  fi
  ip netns exec "$name-n0" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$name-n0" \
    mpirun "${root[@]}" -np "$np" --hostfile "$statedir/hostfile" \
    --oversubscribe --map-by node --bind-to none \
    --mca plm_rsh_agent "$statedir/agent" --mca plm_rsh_no_tree_spawn 1 \
    --mca btl_tcp_if_include "$SUBNET" --mca oob_tcp_if_include "$SUBNET" \
    "${coll[@]}" \
    --mca oob_tcp_keepalive_time 5 --mca oob_tcp_keepalive_intvl 5 \
    --mca oob_tcp_keepalive_probes 3 \
    -x OASR_CLUSTER_CPUS -x OASR_CLUSTER_NAME -x OASR_REPORT_FILE \
    "${launch[@]}" "$@" &
  pid=$!
  # Signals to this launcher reach the job (mpirun passes them on).
  trap 'kill -TERM $pid 2>/dev/null' TERM
  trap 'kill -INT $pid 2>/dev/null' INT
  trap 'kill -HUP $pid 2>/dev/null' HUP
  # `wait` returns early (above 128) when a trapped signal arrives.
  while :; do
    wait "$pid"
    status=$?
    kill -0 "$pid" 2>/dev/null || break
  done
  trap - TERM INT HUP
  if [ -n "$report" ]; then
    [ -s "$report" ] && cat "$report" >&2
    rm -f "$report"
  fi
  return "$status"
}

case "$cmd" in
  up) cmd_up "$@" ;;
  down) cmd_down "$@" ;;
  status) cmd_status "$@" ;;
  run) cmd_run "$@" ;;
  loss) cmd_loss "$@" ;;
esac
