#!/usr/bin/env bash
# Runs COMMAND on NP ranks of an emulated cluster of NODES nodes
# (scripts/cluster.sh) made for this job alone, and always tears it down:
#   cluster_job.sh SRC OUT NODES NP [--down-while-running |
#                  --cut-link-after=S | --blip-link=S:D] [--as-is]
#                  [--plain] -- COMMAND...
# SRC is the source tree, OUT a fresh directory (state, per-rank records).
# Prints the cluster's name, what each rank recorded (rank, namespace,
# hostname, address), the bytes the second node sent over its link during the
# run, and that nothing of the cluster is left; exits with the run's status
# (1 when something is left behind). --down-while-running calls `down` while
# the ranks run and checks that it ends them. --cut-link-after=S takes the
# last node's link down S seconds after its ranks start (the switch port:
# a cut cable) and says how long the run went on after that. --blip-link=S:D
# takes it down S seconds after the ranks start and up again D seconds later,
# and says whether the run was still going when the link came back.
# --as-is runs
# COMMAND as it is, without the per-rank records (`cluster.sh run -- oasr-run
# ... --max-restarts=N` needs oasr-run as the command). --plain launches
# without cluster.sh's allreduce choices, as a user's own mpirun would.
set -u
src=$1 out=$2 nodes=$3 np=$4
shift 4
down_while_running=0 cut_after=
if [ "${1:-}" = --down-while-running ]; then down_while_running=1; shift; fi
if [[ ${1:-} == --cut-link-after=* ]]; then cut_after=${1#*=}; shift; fi
blip=
if [[ ${1:-} == --blip-link=* ]]; then blip=${1#*=}; shift; fi
as_is=0
if [ "${1:-}" = --as-is ]; then as_is=1; shift; fi
plain=()
if [ "${1:-}" = --plain ]; then plain=(--plain); shift; fi
[ "${1:-}" = -- ] || { echo "cluster_job: expected -- COMMAND" >&2; exit 2; }
shift
cluster=$src/scripts/cluster.sh
# Unique on this host (lit workers and other users run side by side).
export OASR_CLUSTER=t$$ OASR_CLUSTER_STATE=$out/state
name=$OASR_CLUSTER
echo "job: cluster $name"

tx_of() { "$cluster" status | sed -n "s/^  $1 .*tx_bytes=\([0-9]*\).*/\1/p"; }

(
  trap '"$cluster" down >/dev/null' EXIT
  "$cluster" up "$nodes" || exit 1
  last=$name-n$(( nodes - 1 ))
  before=$(tx_of "$last")
  # Each rank records where it runs, then becomes COMMAND.
  record='echo "rank $OMPI_COMM_WORLD_RANK: namespace $(ip netns identify), host $(hostname), address $(ip -4 -o addr show dev eth0 | awk "{print \$4}")" > "$0/rank$OMPI_COMM_WORLD_RANK.txt"; exec "$@"'
  # Runs the job in the background (its pid in `job`) once the last node's
  # ranks have started.
  start_job() {
    "$cluster" run "$np" -- sh -c "$record" "$out" "$@" &
    job=$!
    for _ in $(seq 100); do
      [ -n "$(ip netns pids "$last" 2>/dev/null)" ] && break
      sleep 0.2
    done
    [ -n "$(ip netns pids "$last")" ] || { echo "job: no process started in $last"; exit 1; }
  }
  if [ -n "$cut_after" ]; then
    start_job "$@"
    sleep "$cut_after"
    ip -n "$name-sw" link set "p$(( nodes - 1 ))" down ||
      { echo "job: cannot cut $last's link"; exit 1; }
    start=$(date +%s)
    echo "job: cut $last's link"
    wait $job
    rc=$?
    echo "job: the run ended with status $rc, $(( $(date +%s) - start )) s after the cut"
    exit $rc
  fi
  if [ -n "$blip" ]; then
    start_job "$@"
    sleep "${blip%%:*}"
    port="p$(( nodes - 1 ))"
    ip -n "$name-sw" link set "$port" down ||
      { echo "job: cannot cut $last's link"; exit 1; }
    echo "job: cut $last's link for ${blip#*:} s"
    cut=$(date +%s)
    # The link stays down D seconds, or until the run ends.
    while kill -0 $job 2>/dev/null && (( $(date +%s) - cut < ${blip#*:} )); do
      sleep 0.2
    done
    if kill -0 $job 2>/dev/null; then
      ip -n "$name-sw" link set "$port" up
      echo "job: the link is back and the run is still going"
      start=$(date +%s)
      wait $job
      rc=$?
      echo "job: the run ended with status $rc, $(( $(date +%s) - start )) s after the link came back"
    else
      wait $job
      rc=$?
      echo "job: the run ended with status $rc, $(( $(date +%s) - cut )) s into the cut"
    fi
    exit $rc
  fi
  if [ "$down_while_running" = 1 ]; then
    start_job "$@"
    start=$(date +%s)
    # bash's "Killed" notice of the job goes to this shell's stderr: not
    # into the output (fd 3 keeps down's own errors).
    exec 3>&2 2>/dev/null
    "$cluster" down 2>&3
    wait $job
    rc=$?
    exec 2>&3 3>&-
    echo "job: the run ended with status $rc, $(( $(date +%s) - start )) s after down"
    exit $rc
  fi
  if [ "$as_is" = 1 ]; then
    "$cluster" run "$np" "${plain[@]}" -- "$@"
  else
    "$cluster" run "$np" "${plain[@]}" -- sh -c "$record" "$out" "$@"
  fi
  rc=$?
  after=$(tx_of "$last")
  echo "job: $last sent $(( after - before )) bytes over its link"
  for (( r = 0; r < np; r++ )); do cat "$out/rank$r.txt" 2>/dev/null; done
  exit $rc
)
rc=$?
left=$(ip netns list | awk '{print $1}' | grep "^$name-")
# The state directory is this job's alone: nothing of it may remain (state,
# lock file).
if [ -n "$left" ] || [ -e "$OASR_CLUSTER_STATE" ]; then
  echo "job: error: cluster $name left behind: ${left//$'\n'/ } $(ls -A "$OASR_CLUSTER_STATE" 2>/dev/null)"
  exit 1
fi
echo "job: cluster $name torn down"
exit $rc
