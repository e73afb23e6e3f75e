#!/usr/bin/env bash
# Re-planning from the run (docs/runtime.md, "Re-planning from the run"):
# on 2 ranks of this host, the oasr strategy three ways, interleaved rounds:
#   default     the plan a new user gets: roofline costs and the default
#               allreduce model, --replan=off (before re-planning existed);
#   replanned   the same start, re-planned after 1 + 3 steps (the default);
#   calibrated  oasr-bench comm + --plan-profile (a measured profile), off.
# Per run: the median step after the (re-)plan, the final plan's prediction,
# its error against that median, and what re-planning cost.
#
#   bench/run_replan.sh [BUILD_DIR] [STEPS] [BATCH] [MODEL]
#
# MODEL: mlp-wide (default; 784-4x2048-10) or a scripts/export_models.py
# model (e.g. resnet18). Writes bench/results/replan[-MODEL][TAG].{json,md}.
# On the emulated cluster (docs/cluster.md), with a cluster of 2 nodes up:
#   LAUNCH="scripts/cluster.sh run 2 --" TAG=-cluster-200mbit \
#     EXTRA=--comm-priority=sleep bench/run_replan.sh build 10 8 resnet18
# (LAUNCH replaces `mpirun --oversubscribe -np 2`; EXTRA is passed to every
# oasr-run and oasr-bench, BENCH_EXTRA to oasr-bench alone, e.g.
# --latency-bytes=4096 on a shaped link; TAG names the results). Every
# run's output is kept in BUILD_DIR/bench-replan/logs.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
STEPS=${2:-20}
BATCH=${3:-64}
NAME=${4:-mlp-wide}
REPS=${REPS:-3}
PY=/usr/bin/python3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
WORK=$BUILD/bench-replan
OUT=$ROOT/bench/results
mkdir -p "$WORK/logs" "$OUT"
. "$ROOT/bench/lib.sh"
MODEL=$(bench_model "$WORK" "$NAME")
SUFFIX=$([ "$NAME" = mlp-wide ] && echo "" || echo "-$NAME")
LAUNCH=${LAUNCH:-mpirun --oversubscribe -np 2}
EXTRA=${EXTRA:-}
SUFFIX=$SUFFIX${TAG:-}
RUN="$LAUNCH $BUILD/bin/oasr-run $MODEL --batch=$BATCH --threads=1 --log-every=100000 --strategy=oasr $EXTRA"
# The calibrated plan's inputs, measured as bench/run_runtime_ranks.sh does.
$LAUNCH "$BUILD/bin/oasr-bench" comm --quiet --collectives=allreduce $EXTRA ${BENCH_EXTRA:-} \
  --max-bytes=67108864 --seconds-per-size=0.3 --burst-us=20000 \
  --compute-threads=1 --out="$WORK/comm.json" >/dev/null
$RUN --steps=$STEPS --replan=off --comm="$WORK/comm.json" \
  --profile="$WORK/profile.json" >/dev/null

runs=()
for rep in $(seq $REPS); do
  for C in default replanned calibrated; do
    case $C in
      default) args="--replan=off" ;;
      replanned) args="--replan=once" ;;
      calibrated) args="--replan=off --comm=$WORK/comm.json --plan-profile=$WORK/profile.json" ;;
    esac
    load=$(cut -d' ' -f1 /proc/loadavg)
    log=$($RUN --steps=$STEPS $args 2>/dev/null)
    echo "$log" > "$WORK/logs/$NAME${TAG:-}-$rep-$C.log"
    median=$(echo "$log" | awk '/mean iteration/ {gsub(/[(]/, ""); print $6}')
    predicted=$(echo "$log" | awk '/^  predicted/ {print $2}')
    groups=$(echo "$log" | awk '/^summary:/ {print $9}')
    cost=$(echo "$log" | sed -n 's/.*planning \([0-9.]*\) ms + switch \([0-9.]*\) ms = \([0-9.]*\)% of a step.*/{"plan_ms": \1, "switch_ms": \2, "percent_of_step": \3}/p')
    echo "round $rep $C: median $median ms, predicted $predicted ms, $groups group(s), load $load" >&2
    runs+=("{\"round\": $rep, \"config\": \"$C\", \"groups\": $groups, \"median_ms\": $median, \"predicted_ms\": $predicted, \"replan\": ${cost:-null}, \"load\": $load}")
  done
done
{
  echo "{\"model\": \"$NAME\", \"batch\": $BATCH, \"steps\": $STEPS, \"ranks\": 2,"
  echo " \"host\": \"$(uname -n), $(nproc) CPUs\", \"date\": \"$(date -u +%Y-%m-%dT%H:%MZ)\","
  echo " \"runs\": [$(IFS=,; echo "${runs[*]}")]}"
} > "$OUT/replan$SUFFIX.json"
$PY - "$OUT/replan$SUFFIX.json" > "$OUT/replan$SUFFIX.md" <<'PYEOF'
import json, statistics, sys
d = json.load(open(sys.argv[1]))
print(f"# Re-planning from the run: {d['model']}, batch {d['batch']}/rank, 2 ranks\n")
print(f"bench/run_replan.sh, {d['host']}, {d['date']}, {d['steps']} steps per run, "
      f"{len(d['runs']) // 3} interleaved rounds; per run the median step after "
      "the (re-)plan (the first step after it excluded).\n")
print("| config | groups | median step (ms) | range of the rounds (ms) | predicted (ms) | error of the prediction | load (1 min) |")
print("|---|---|---|---|---|---|---|")
for c in ["default", "replanned", "calibrated"]:
    rs = [r for r in d["runs"] if r["config"] == c]
    med = statistics.median(r["median_ms"] for r in rs)
    errs = [abs(r["median_ms"] - r["predicted_ms"]) / r["median_ms"] for r in rs]
    print(f"| {c} | {'/'.join(str(r['groups']) for r in rs)} | {med:.2f} | "
          f"{min(r['median_ms'] for r in rs):.2f}-{max(r['median_ms'] for r in rs):.2f} | "
          f"{statistics.median(r['predicted_ms'] for r in rs):.2f} | "
          f"{100 * statistics.median(errs):.1f}% (runs {', '.join(f'{100*e:.1f}%' for e in errs)}) | "
          f"{', '.join(str(r['load']) for r in rs)} |")
rp = [r["replan"] for r in d["runs"] if r["replan"]]
if rp:
    print(f"\nRe-planning cost (agree + fit + plan, then switch): "
          f"{', '.join('%.2f + %.2f ms' % (r['plan_ms'], r['switch_ms']) for r in rp)}; "
          f"{', '.join(str(r['percent_of_step']) for r in rp)} % of a step.")
PYEOF
cat "$OUT/replan$SUFFIX.md"
