#!/usr/bin/env bash
#===- bench/run_pipeline.sh - Time --oasr-train-pipeline on real models ----===#
#
# usage: bench/run_pipeline.sh [BUILD_DIR] [MODELS_DIR]
#   BUILD_DIR   build tree with bin/oasr-opt and bin/oasr-translate (default: build)
#   MODELS_DIR  where scripts/export_models.py writes/keeps the ONNX files
#               (default: BUILD_DIR/models)
# Imports each model once (batch 32), then times the whole training pipeline
# (autodiff, annotate-cost, plan-allreduce, layout, optimizer; parse and print
# included) REPEAT times and keeps the median and the best, plus one
# --mlir-timing breakdown for ResNet-50. Writes bench/results/pipeline.json
# and bench/results/pipeline.txt. The issue's target: ResNet-50 under 2 s.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
MODELS=${2:-$BUILD/models}
REPEAT=${REPEAT:-5}
LIST=${LIST:-resnet50,vgg16,googlenet,densenet121,transformer}
OPT=$BUILD/bin/oasr-opt
TRANSLATE=$BUILD/bin/oasr-translate
PIPELINE="device=v100 strategy=oasr alpha=2.36e-4 beta=4.06e-10 algo=momentum"
OUT=bench/results
mkdir -p "$MODELS" "$OUT"
/usr/bin/python3 scripts/export_models.py "$MODELS" --models "$LIST" --opset 14 >/dev/null

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
rows=()
for m in ${LIST//,/ }; do
  batch=32
  [ "$m" = transformer ] && batch=8
  "$TRANSLATE" --import-onnx "$MODELS/$m.onnx" --batch=$batch -o "$TMP/$m.mlir"
  times=()
  for _ in $(seq "$REPEAT"); do
    s=$(date +%s.%N)
    "$OPT" "$TMP/$m.mlir" --oasr-train-pipeline="$PIPELINE" -o "$TMP/$m.out.mlir"
    e=$(date +%s.%N)
    times+=("$(echo "$e - $s" | bc -l)")
  done
  nodes=$(grep -c 'oasr.node' "$TMP/$m.out.mlir")
  groups=$(grep -c 'oasr.allreduce_start' "$TMP/$m.out.mlir")
  rows+=("$m $batch $nodes $groups ${times[*]}")
done
"$OPT" "$TMP/resnet50.mlir" --oasr-train-pipeline="$PIPELINE" --mlir-timing \
  -o /dev/null 2> "$TMP/timing.txt" || true

/usr/bin/python3 - "$OUT" "$TMP/timing.txt" "${rows[@]}" <<'PY'
import json, platform, statistics, subprocess, sys, time
out, timing = sys.argv[1], open(sys.argv[2]).read()
cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"],
                     capture_output=True, text=True).stdout.strip()
results = []
for row in sys.argv[3:]:
    f = row.split()
    t = [float(x) for x in f[4:]]
    results.append({"model": f[0], "batch": int(f[1]), "nodes": int(f[2]),
                    "groups": int(f[3]), "median_s": statistics.median(t),
                    "best_s": min(t), "runs_s": t})
doc = {"benchmark": "oasr-opt --oasr-train-pipeline (parse + 5 passes + print)",
       "machine": "%s, %d CPUs" % (cpu, __import__("os").cpu_count()),
       "date": time.strftime("%Y-%m-%d"), "target": "resnet50 < 2 s",
       "results": results}
json.dump(doc, open(out + "/pipeline.json", "w"), indent=2)
with open(out + "/pipeline.txt", "w") as f:
    f.write("oasr-opt --oasr-train-pipeline, %s, %s\n" % (doc["machine"], doc["date"]))
    f.write("%-12s %5s %6s %6s %10s %10s\n" % ("model", "batch", "nodes", "groups", "median_s", "best_s"))
    for r in results:
        f.write("%-12s %5d %6d %6d %10.3f %10.3f\n" % (r["model"], r["batch"], r["nodes"],
                                                    r["groups"], r["median_s"], r["best_s"]))
    f.write("\nResNet-50 --mlir-timing:\n" + timing)
print(open(out + "/pipeline.txt").read())
PY
