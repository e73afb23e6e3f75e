#!/usr/bin/env bash
#===- bench/run_fault_soak.sh - The fault tests, repeated under load -----===#
#
# Runs the lit tests that end a job on a failure (a cut link, a blip, a
# killed rank) ROUNDS times while the whole lit suite runs beside them
# (restarted when it ends; its outputs in a directory of its own,
# OASR_LIT_EXEC_ROOT), and writes how often each passed to
# bench/results/NAME.md (never overwritten).
#
#   bench/run_fault_soak.sh [ROUNDS] [NAME]     (defaults: 10, fault-soak-DATE)
#
# Needs a built tree (build/, scripts/check.sh makes it) and root for the
# emulated cluster's namespaces.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
ROUNDS=${1:-10}
NAME=${2:-fault-soak-$(date +%Y-%m-%d)}
OUT=$ROOT/bench/results/$NAME.md
[ -e "$OUT" ] && { echo "run_fault_soak: $OUT exists: results are never overwritten; pass another NAME" >&2; exit 2; }
LIT=/usr/lib/llvm-19/build/utils/lit/lit.py
BUILD=$ROOT/build
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
FAULTS=(blip-cluster watchdog-cluster rank-failure)
log=$(mktemp -d)
declare -A passed
for t in "${FAULTS[@]}"; do passed[$t]=0; done
loads=()
start=$(date +%s)
for round in $(seq "$ROUNDS"); do
  # The load: the whole suite, restarted whenever it ends, in a session of
  # its own so that ending it ends lit and its ranks too.
  mkdir -p "$log/load"
  OASR_LIT_EXEC_ROOT=$log/load setsid bash -c \
    'while :; do /usr/bin/python3 "$0" -sv "$1" >>"$2" 2>&1; done' \
    "$LIT" "$BUILD/test" "$log/load.log" &
  load=$!
  loads+=("$(cut -d' ' -f1 /proc/loadavg)")
  for t in "${FAULTS[@]}"; do
    if OASR_LIT_EXEC_ROOT=$log/faults /usr/bin/python3 "$LIT" -v "$BUILD/test/runtime/$t.test" >"$log/$t-$round.log" 2>&1; then
      passed[$t]=$(( ${passed[$t]} + 1 ))
      echo "round $round: $t passed"
    else
      echo "round $round: $t FAILED (kept: $log/$t-$round.log)"
    fi
  done
  loads+=("$(cut -d' ' -f1 /proc/loadavg)")
  kill -- "-$load" 2>/dev/null
  wait "$load" 2>/dev/null
done
elapsed=$(( $(date +%s) - start ))
{
  echo "# Fault tests under load, $ROUNDS rounds"
  echo
  echo "\`bench/run_fault_soak.sh $ROUNDS $NAME\` on $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //') ($(nproc) cores), $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD)."
  echo "Beside each round the whole lit suite ran (one lit process, 2 workers), restarted when it ended."
  echo "Load average (1 min) sampled at each round's start and end: ${loads[*]}. Wall time ${elapsed} s."
  echo
  echo "| test | passed |"
  echo "|---|---|"
  for t in "${FAULTS[@]}"; do echo "| runtime/$t.test | ${passed[$t]}/$ROUNDS |"; done
} >"$OUT"
cat "$OUT"
echo "the load's lit output: $log/load.log"
