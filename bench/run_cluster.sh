#!/usr/bin/env bash
# Every strategy on the emulated cluster (scripts/cluster.sh, docs/cluster.md):
# NODES nodes (one rank each) over RATE-shaped links. Calibrates the allreduce
# on the shaped link (oasr-bench comm, at the communication priority the runs
# use), profiles the model there (a single-group run), then trains with each
# strategy,
# REPS rounds interleaved (each round runs every strategy once, so a slow
# spell of the shared host does not land on one strategy). Records the load
# average before each run and flags runs started above LOAD_FLAG.
# PyTorch DDP (bench/ddp_step.py: the same torchvision model, batch, one
# compute thread per rank, plain SGD; gloo over the cluster's links) runs in
# the same rounds twice: with DDP's default 25 MB buckets and with the bucket
# size oasr-plan predicts fastest on the same profile and calibration.
#
#   bench/run_cluster.sh [BUILD_DIR] [STEPS] [BATCH] [MODEL] [RATE]
#
# MODEL: a scripts/export_models.py model (default resnet18); RATE a tc rate
# (default 1gbit). Environment: NODES (2), REPS (3), PRIORITY (auto: the
# calibration measures both and the runs use what it records), STRATEGIES,
# DDP (1: the PyTorch rows; 0: none), TORCH_PY (/root/venv-torch/bin/python,
# PyPI's torch with MKL and oneDNN), LOAD_FLAG (2 x cores), GRAD_DTYPE (f32;
# bf16 or f16: gradients on the wire in that type, oasr-run --grad-dtype
# and DDP's bf16/fp16 compression hook), SUFFIX (appended to the results'
# name), MODEL_FROM (calibration: plans from the oasr-bench calibration and
# a single-group profile; run: from what an oasr run measured in itself --
# its re-plan's profile and fitted allreduce model with the compute rate
# and overlap rate of that run, `--replan-profile`; docs/runtime.md,
# "Re-planning from the run"), PROFILE_EVERY_ROUND (with MODEL_FROM=run,
# 1 by default: that run is repeated at the start of every round and the
# round's plans and predictions come from it), PROFILE_REPLAN (that run's
# --replan, every:2xSTEPS-1: one re-plan from all its steps), PRECISION
# (f32; bf16: oasr-run --precision=bf16 and DDP under torch.autocast bf16).
# Exposed communication is the step minus the same system's step without
# communication, by one definition for both: each round also times oasr's
# ranks training with no communication at all (--algo=sync-easgd with an
# exchange period longer than the run: the same executor, per-rank steps),
# and DDP's no_sync() steps (bench/ddp_step.py). DDP runs with
# broadcast_buffers=False, as oasr does not broadcast BatchNorm's statistics.
# A strategy written NAME+compress=C runs NAME with oasr-run --compress=C
# (docs/compression.md), e.g. STRATEGIES="oasr oasr+compress=auto"; one
# written NAME+two-level=R runs it with --two-level=R, and the suffixes
# combine (oasr+compress=auto+two-level=flat). RANKS (NODES) ranks
# run on the NODES nodes, round-robin (scripts/cluster.sh): with RANKS a
# multiple of NODES above it, ranks share nodes, the calibration measures
# the two-level allreduce's tiers, and plans may send groups two-level.
# CALIB_MAX_BYTES (64 MiB): the calibration's largest allreduce.
# Writes bench/results/cluster-MODEL-NODESxRATE[-GRAD_DTYPE][-ampPRECISION][SUFFIX]
# .{json,md}. Needs root (namespaces).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
STEPS=${2:-6}
BATCH=${3:-8}
NAME=${4:-resnet18}
RATE=${5:-1gbit}
NODES=${NODES:-2}
RANKS=${RANKS:-$NODES}
REPS=${REPS:-3}
PRIORITY=${PRIORITY:-auto}
STRATEGIES=${STRATEGIES:-wfbp single ddp horovod mgwfbp optimal oasr}
DDP=${DDP:-1}
TORCH_PY=${TORCH_PY:-/root/venv-torch/bin/python}
LOAD_FLAG=${LOAD_FLAG:-$(( 2 * $(nproc) ))}
PY=/usr/bin/python3
CLUSTER="$ROOT/scripts/cluster.sh --name=bench"
WORK=$BUILD/bench-cluster
OUT=$ROOT/bench/results
GRAD_DTYPE=${GRAD_DTYPE:-f32}
PRECISION=${PRECISION:-f32}
MODEL_FROM=${MODEL_FROM:-calibration}
TAG=cluster-$NAME-${NODES}x$RATE$([ "$RANKS" = "$NODES" ] || echo "-${RANKS}ranks")$([ "$GRAD_DTYPE" = f32 ] || echo "-$GRAD_DTYPE")$([ "$PRECISION" = f32 ] || echo "-amp$PRECISION")${SUFFIX:-}
mkdir -p "$WORK" "$OUT"
. "$ROOT/bench/lib.sh"
MODEL=$(bench_model "$WORK" "$NAME")

trap '$CLUSTER down >/dev/null' EXIT
$CLUSTER up "$NODES" --rate="$RATE"
COMM=$WORK/comm-$NODES-$RATE.json
PROFILE=$WORK/profile-$NAME-$NODES-$RATE.json
# The runs take the priority the calibration records (--comm=FILE).
# The plan as the strategy makes it from the calibration and profile
# (--replan=off: the table compares the strategies and their predictions).
BASE="$BUILD/bin/oasr-run $MODEL --batch=$BATCH --threads=1 --quiet --replan=off"
[ "$GRAD_DTYPE" = f32 ] || BASE="$BASE --grad-dtype=$GRAD_DTYPE"
[ "$PRECISION" = f32 ] || BASE="$BASE --precision=$PRECISION"
MASTER=$($CLUSTER status | awk '$1 ~ /-n0$/ {print $2}')

# The calibration as training issues allreduces: on the communication thread
# at the runs' priority, each after 20 ms of compute; the overlap rate beside
# one busy compute thread per rank. From CALIB_MIN_BYTES (64 KiB) up, with
# alpha measured on one 4 KiB allreduce (--latency-bytes) and beta fitted
# above it. With the first tbf buckets (2 ms, then 80 KiB over 64 KiB GSO
# packets) the bucket refilled during the compute stretch and let smaller
# allreduces through at veth speed; a line through those points and the
# rate-bound large ones fitted neither, and calibrations started at 1 MiB.
# scripts/cluster.sh's 24-25 KB bucket over 16 KiB packets keeps the line
# from 64 KiB.
CALIB_MIN_BYTES=${CALIB_MIN_BYTES:-65536}
# Plans that may reduce-scatter (dear, oasr-step) use the measured halves.
COLLECTIVES=allreduce
case " $STRATEGIES " in
*" dear"* | *" oasr-step "*) COLLECTIVES=allreduce,reduce-scatter,all-gather ;;
esac
$CLUSTER run "$RANKS" -- "$BUILD/bin/oasr-bench" comm --quiet --collectives=$COLLECTIVES \
  --min-bytes="$CALIB_MIN_BYTES" --latency-bytes=4096 \
  --max-bytes="${CALIB_MAX_BYTES:-67108864}" --seconds-per-size=0.2 --burst-us=20000 \
  --compute-threads=1 --comm-priority="$PRIORITY" --out="$COMM" >/dev/null
PRIORITY=$($PY -c 'import json, sys; print(json.load(open(sys.argv[1]))["comm_priority"])' "$COMM")
# The profile: compute alone, from a single-group run of 2 x STEPS steps
# (its allreduce runs after backward, so nothing slows backward); the
# calibration's compute rate charges the slowdown beside communication to
# each plan (docs/planner.md, "The compute rate").
# With MODEL_FROM=run, an oasr run of 2 x STEPS steps re-plans once from
# its own steps (PROFILE_REPLAN, every:2xSTEPS-1: 1 warm-up, the rest
# measured, the last with compute alone) and writes that profile with its
# fitted model as `comm`; every plan of a round is made from it alone.
# Each instruction's time is its median over the measured steps: with
# --replan=once (3 measured steps) a slow spell of the shared host over two
# of them was the profile, and the round's predictions came out 20-30 %
# high (transformer, 2026-11-26).
# PROFILE_EVERY_ROUND=1 (the default there) measures it anew at the start
# of each round: the shared host drifts (ResNet-18's `oasr` ran 1079-1207 ms
# a step across the rounds of one table, every strategy alike), and a
# profile from the first minutes then predicted every later round 3-7 %
# low, which is the host's drift, not the model's error.
PROFILE_EVERY_ROUND=${PROFILE_EVERY_ROUND:-$([ "$MODEL_FROM" = run ] && echo 1 || echo 0)}
PROFILE_REPLAN=${PROFILE_REPLAN:-every:$((2 * STEPS - 1))}
profile_run() { # PROFILE_FILE: profile it and plan the round's runs from it
  $CLUSTER run "$RANKS" -- ${BASE/--replan=off/--replan=$PROFILE_REPLAN} \
    --steps=$((2 * STEPS)) --strategy=oasr --comm="$COMM" \
    --replan-profile="$1" >/dev/null
  ROUND_PROFILE=$1
  # Without --comm the runs take the calibration's priority explicitly.
  PLAN_MODEL=(--plan-profile="$1" --comm-priority="$PRIORITY")
}
profile_comm() { # PROFILE_FILE: its fitted model as JSON
  $PY -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["comm"]))' "$1"
}
if [ "$MODEL_FROM" = run ]; then
  profile_run "$PROFILE"
else
  $CLUSTER run "$RANKS" -- $BASE --steps=$((2 * STEPS)) --strategy=single \
    --comm="$COMM" --profile="$PROFILE" >/dev/null
  PLAN_MODEL=(--comm="$COMM" --plan-profile="$PROFILE")
fi
# The bucket size for DDP that oasr-plan predicts fastest (1-64 MiB; among
# predictions within 0.5 % of the best, the largest bucket: fewest calls).
buckets=$(for b in 1 2 4 8 16 32 64; do printf 'bucket:%d,' $((b << 20)); done)
BEST_MB=$("$BUILD/bin/oasr-plan" "$PROFILE" $([ "$MODEL_FROM" = run ] || echo --comm="$COMM") --strategy="${buckets%,}" \
  --grad-dtype="$GRAD_DTYPE" \
  --format=json | $PY -c 'import json, sys
s = json.load(sys.stdin)["strategies"]
best = min(x["iteration_us"] for x in s)
ok = [int(x["name"].split(":")[1]) for x in s if x["iteration_us"] <= 1.005 * best]
print(max(ok) >> 20)')
DDP_RUNS=""
[ "$DDP" = 1 ] && DDP_RUNS="torch-ddp:25 torch-ddp:$BEST_MB"

# A run's time per step: the median of its steps after the first (oasr-run's
# and ddp_step.py's "mean iteration X ms (median Y ms, ...)"); the mean is
# kept beside it. On this shared host one step in twenty can take 1.5x
# (another tenant's burst: 93 ms in a run of 61 ms steps), which moves a
# 20-step mean by 2-3 %, and no plan or model has a say in it.
step_median() { echo "$1" | awk '/mean iteration/ {print $6}'; }
step_mean() { echo "$1" | awk '/mean iteration/ {print $3}'; }
runs=()
run_models=()
compute_only=()
for rep in $(seq "$REPS"); do
  # oasr's step without communication on the same ranks (see the top).
  log=$($CLUSTER run "$RANKS" -- $BASE --steps="$STEPS" --strategy=single \
    --algo=sync-easgd --easgd-tau=1000000000 "${PLAN_MODEL[@]}")
  echo "round $rep oasr compute only: $(step_median "$log") ms" >&2
  compute_only+=("{\"round\": $rep, \"system\": \"oasr\", \"measured_ms\": $(step_median "$log"), \"load\": $(cut -d' ' -f1 /proc/loadavg)}")
  [ "$MODEL_FROM" = run ] && [ "$PROFILE_EVERY_ROUND" = 1 ] && [ "$rep" -gt 1 ] &&
    profile_run "${PROFILE%.json}-r$rep.json"
  [ "$MODEL_FROM" = run ] && run_models+=("$(profile_comm "$ROUND_PROFILE")")
  for S in $STRATEGIES $DDP_RUNS; do
    load=$(cut -d' ' -f1 /proc/loadavg)
    if [[ "$S" == torch-ddp:* ]]; then
      log=$($CLUSTER run "$RANKS" -- "$TORCH_PY" "$ROOT/bench/ddp_step.py" "$NAME" \
        --master="$MASTER" --batch="$BATCH" --steps="$STEPS" \
        --bucket-cap-mb="${S#torch-ddp:}" --grad-dtype="$GRAD_DTYPE" \
        --precision="$PRECISION" 2>/dev/null)
      torch=$(echo "$log" | sed -n 's/.*; torch \(.*\)$/\1/p')
      groups=$(echo "$log" | sed -n 's/.*, \([0-9]*\) bucket(s),.*/\1/p')
      measured=$(step_median "$log")
      mean=$(step_mean "$log")
      exposed=$(echo "$log" | awk '/exposed comm/ {print $3}')
      compute=$(echo "$log" | awk '/^  compute/ {print $2}')
      echo "round $rep $S: $measured ms (compute only $compute ms, load $load)" >&2
      runs+=("{\"round\": $rep, \"strategy\": \"$S\", \"groups\": $groups, \"measured_ms\": $measured, \"mean_ms\": $mean, \"predicted_ms\": null, \"replayed_ms\": null, \"exposed_comm_ms\": $exposed, \"compute_only_ms\": $compute, \"load\": $load, \"torch\": \"$torch\"}")
      continue
    fi
    # NAME+compress=C+two-level=R: the strategy with oasr-run --compress=C
    # --two-level=R (each +OPTION=VALUE becomes --OPTION=VALUE).
    IFS='+' read -r -a parts <<<"$S"
    extra=()
    for p in "${parts[@]:1}"; do extra+=(--"$p"); done
    log=$($CLUSTER run "$RANKS" -- $BASE --steps="$STEPS" --strategy="${S%%+*}" \
      "${extra[@]}" "${PLAN_MODEL[@]}")
    measured=$(step_median "$log")
    mean=$(step_mean "$log")
    predicted=$(echo "$log" | awk '/^  predicted/ {print $2}')
    replayed=$(echo "$log" | awk '/replayed/ {print $2}')
    exposed=$(echo "$log" | awk '/exposed comm/ {print $3}')
    groups=$(echo "$log" | sed -n 's/.*strategy .*, \([0-9]*\) group(s)/\1/p')
    echo "round $rep $S: $measured ms (predicted $predicted, load $load)" >&2
    runs+=("{\"round\": $rep, \"strategy\": \"$S\", \"groups\": $groups, \"measured_ms\": $measured, \"mean_ms\": $mean, \"predicted_ms\": $predicted, \"replayed_ms\": ${replayed:-null}, \"exposed_comm_ms\": $exposed, \"load\": $load}")
  done
done

machine="$(uname -m), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), kernel $(uname -r)"
date=$(date -u +%Y-%m-%dT%H:%MZ)
calib=$($PY -c 'import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps({k: d.get(k) for k in ("alpha_s", "beta_s_per_byte", "overlap_rate", "compute_rate", "burst_us", "comm_priority", "points", "two_level")} | {"by_priority": d.get("overlap", {}).get("by_priority")}))' "$COMM")
{
  echo "{\"benchmark\": \"cluster\", \"date\": \"$date\", \"machine\": \"$machine\","
  echo " \"nodes\": $NODES, \"ranks\": $RANKS, \"cores\": $(nproc), \"rate\": \"$RATE\", \"model\": \"$NAME\", \"batch\": $BATCH, \"steps\": $STEPS,"
  echo " \"step_stat\": \"median\","
  echo " \"threads_per_rank\": 1, \"grad_dtype\": \"$GRAD_DTYPE\", \"precision\": \"$PRECISION\", \"comm_priority\": \"$PRIORITY\", \"rounds\": $REPS, \"load_flag\": $LOAD_FLAG,"
  echo " \"calibration\": $calib, \"calib_min_bytes\": $CALIB_MIN_BYTES, \"ddp_plan_bucket_mb\": ${BEST_MB:-null},"
  echo " \"model_from\": \"$MODEL_FROM\", \"run_model\": $([ "$MODEL_FROM" = run ] && profile_comm "$PROFILE" || echo null),"
  echo " \"profile_every_round\": $([ "$PROFILE_EVERY_ROUND" = 1 ] && echo true || echo false),"
  echo " \"profile_replan\": \"$PROFILE_REPLAN\","
  echo " \"run_models\": [$(IFS=,; echo "${run_models[*]-}")],"
  echo " \"compute_only\": [$(IFS=,; echo "${compute_only[*]-}")],"
  echo " \"ddp_broadcast_buffers\": false,"
  echo " \"runs\": ["
  (IFS=$',\n'; echo "  ${runs[*]}")
  echo "]}"
} >"$OUT/$TAG.json"
$PY "$ROOT/bench/cluster_report.py" "$OUT/$TAG.json" >"$OUT/$TAG.md"
cat "$OUT/$TAG.md"
