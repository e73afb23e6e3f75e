#!/usr/bin/env bash
# Every strategy on the emulated cluster (scripts/cluster.sh, docs/cluster.md):
# NODES nodes (one rank each) over RATE-shaped links. Calibrates the allreduce
# on the shaped link (oasr-bench comm, at the communication priority the runs
# use), profiles the model there (a wfbp run), then trains with each strategy,
# REPS rounds interleaved (each round runs every strategy once, so a slow
# spell of the shared host does not land on one strategy). Records the load
# average before each run and flags runs started above LOAD_FLAG.
#
#   bench/run_cluster.sh [BUILD_DIR] [STEPS] [BATCH] [MODEL] [RATE]
#
# MODEL: a scripts/export_models.py model (default resnet18); RATE a tc rate
# (default 1gbit). Environment: NODES (2), REPS (3), PRIORITY (normal),
# STRATEGIES, LOAD_FLAG (2 x cores). Writes
# bench/results/cluster-MODEL-NODESxRATE.{json,md}. Needs root (namespaces).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
STEPS=${2:-6}
BATCH=${3:-8}
NAME=${4:-resnet18}
RATE=${5:-1gbit}
NODES=${NODES:-2}
REPS=${REPS:-3}
PRIORITY=${PRIORITY:-normal}
STRATEGIES=${STRATEGIES:-wfbp single ddp horovod mgwfbp optimal oasr}
LOAD_FLAG=${LOAD_FLAG:-$(( 2 * $(nproc) ))}
PY=/usr/bin/python3
CLUSTER="$ROOT/scripts/cluster.sh --name=bench"
WORK=$BUILD/bench-cluster
OUT=$ROOT/bench/results
TAG=cluster-$NAME-${NODES}x$RATE
mkdir -p "$WORK" "$OUT"
MODEL=$WORK/$NAME.onnx
[ -f "$MODEL" ] || $PY "$ROOT/scripts/export_models.py" "$WORK" --models "$NAME" >/dev/null 2>&1

trap '$CLUSTER down >/dev/null' EXIT
$CLUSTER up "$NODES" --rate="$RATE"
COMM=$WORK/comm-$NODES-$RATE.json
PROFILE=$WORK/profile-$NAME-$NODES-$RATE.json
BASE="$BUILD/bin/oasr-run $MODEL --batch=$BATCH --threads=1 --quiet --comm-priority=$PRIORITY"

# The calibration as training issues allreduces: on the communication thread
# at the runs' priority, each after 20 ms of compute; the overlap rate beside
# one busy compute thread per rank. From CALIB_MIN_BYTES (1 MiB) up: tbf's
# bucket (2 ms at the rate) refills during the compute stretch and lets
# smaller allreduces through at veth speed, and a line through those points
# and the rate-bound large ones fits neither (a first 1 Gbit/s run from 4 B
# fitted 538 MB/s, where 16-64 MiB took 14-17 ns/B, 60-75 MB/s).
CALIB_MIN_BYTES=${CALIB_MIN_BYTES:-1048576}
$CLUSTER run "$NODES" -- "$BUILD/bin/oasr-bench" comm --quiet \
  --min-bytes="$CALIB_MIN_BYTES" \
  --max-bytes=67108864 --seconds-per-size=0.2 --burst-us=20000 \
  --compute-threads=1 --comm-priority="$PRIORITY" --out="$COMM" >/dev/null
# The profile: a wfbp run of 2 x STEPS steps.
$CLUSTER run "$NODES" -- $BASE --steps=$((2 * STEPS)) --strategy=wfbp \
  --comm="$COMM" --profile="$PROFILE" >/dev/null

runs=()
for rep in $(seq "$REPS"); do
  for S in $STRATEGIES; do
    load=$(cut -d' ' -f1 /proc/loadavg)
    log=$($CLUSTER run "$NODES" -- $BASE --steps="$STEPS" --strategy="$S" \
      --comm="$COMM" --plan-profile="$PROFILE")
    measured=$(echo "$log" | awk '/mean iteration/ {print $3}')
    predicted=$(echo "$log" | awk '/^  predicted/ {print $2}')
    replayed=$(echo "$log" | awk '/replayed/ {print $2}')
    exposed=$(echo "$log" | awk '/exposed comm/ {print $3}')
    groups=$(echo "$log" | sed -n 's/.*strategy .*, \([0-9]*\) group(s)/\1/p')
    echo "round $rep $S: $measured ms (predicted $predicted, load $load)" >&2
    runs+=("{\"round\": $rep, \"strategy\": \"$S\", \"groups\": $groups, \"measured_ms\": $measured, \"predicted_ms\": $predicted, \"replayed_ms\": ${replayed:-null}, \"exposed_comm_ms\": $exposed, \"load\": $load}")
  done
done

machine="$(uname -m), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), kernel $(uname -r)"
date=$(date -u +%Y-%m-%dT%H:%MZ)
calib=$($PY -c 'import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps({k: d.get(k) for k in ("alpha_s", "beta_s_per_byte", "overlap_rate", "burst_us")} | {"comm_priority": d.get("overlap", {}).get("comm_priority")}))' "$COMM")
{
  echo "{\"benchmark\": \"cluster\", \"date\": \"$date\", \"machine\": \"$machine\","
  echo " \"nodes\": $NODES, \"rate\": \"$RATE\", \"model\": \"$NAME\", \"batch\": $BATCH, \"steps\": $STEPS,"
  echo " \"threads_per_rank\": 1, \"comm_priority\": \"$PRIORITY\", \"rounds\": $REPS, \"load_flag\": $LOAD_FLAG,"
  echo " \"calibration\": $calib, \"calib_min_bytes\": $CALIB_MIN_BYTES,"
  echo " \"runs\": ["
  (IFS=$',\n'; echo "  ${runs[*]}")
  echo "]}"
} >"$OUT/$TAG.json"
$PY - "$OUT/$TAG.json" >"$OUT/$TAG.md" <<'PYEOF'
import json, statistics, sys
d = json.load(open(sys.argv[1]))
c = d["calibration"]
loads = [r["load"] for r in d["runs"]]
print(f"# Emulated cluster: {d['nodes']} nodes at {d['rate']}, {d['model']}\n")
print(f"{d['date']}, {d['machine']}; load average (1 min) before the runs "
      f"{min(loads):.2f}-{max(loads):.2f}, median {statistics.median(loads):.2f}. "
      f"`scripts/cluster.sh up {d['nodes']} --rate={d['rate']}` (one rank per node, "
      f"pinned one per core), batch {d['batch']}/rank, 1 compute thread/rank, "
      f"communication thread at {d['comm_priority']} priority; mean of steps "
      f"2..{d['steps']}; {d['rounds']} rounds, each running every strategy once "
      "(interleaved): the median round and the range. Calibration on the shaped "
      f"link (`oasr-bench comm --burst-us=20000`): alpha = {c['alpha_s']:.3g} s, "
      f"beta = {c['beta_s_per_byte']:.3g} s/B ({1e-6 / c['beta_s_per_byte']:.1f} MB/s), "
      f"overlap rate {c['overlap_rate']:.2f} (sizes from {d['calib_min_bytes']} B). Predicted: the plan's timeline from "
      "that calibration and a profile measured on the cluster (a separate wfbp "
      "run); replayed: the same model on the run's own profile.\n")
print("| strategy | groups | measured (ms) | range (ms) | predicted (ms) | error | replayed (ms) | exposed comm (ms) | runs above load flag |")
print("|---|---|---|---|---|---|---|---|---|")
by = {}
for r in d["runs"]:
    by.setdefault(r["strategy"], []).append(r)
rows = []
for s, rs in by.items():
    ms = sorted(rs, key=lambda r: r["measured_ms"])
    med = ms[(len(ms) - 1) // 2]
    rows.append((s, med, [r["measured_ms"] for r in rs],
                 sum(1 for r in rs if r["load"] > d["load_flag"])))
best = min(rows, key=lambda t: t[1]["measured_ms"])
for s, med, times, flagged in rows:
    lo, hi = min(times), max(times)
    mark = " **fastest**" if s == best[0] else (" (tied)" if lo <= max(best[2]) else "")
    p = med["predicted_ms"]
    err = f"{(med['measured_ms'] - p) / p * 100:+.1f} %" if p else "n/a"
    rep = med.get("replayed_ms")
    reps = f"{rep:.1f}" if rep else "n/a"
    print(f"| {s}{mark} | {med['groups']} | {med['measured_ms']:.1f} | {lo:.1f}-{hi:.1f} | "
          f"{p:.1f} | {err} | {reps} | {med['exposed_comm_ms']:.1f} | {flagged}/{len(times)} |")
print(f"\n*(tied)*: its fastest round is faster than the fastest strategy's slowest "
      f"round. Load flag: runs started with the 1-minute load average above "
      f"{d['load_flag']} (the host is shared).")
PYEOF
cat "$OUT/$TAG.md"
