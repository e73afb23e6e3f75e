#!/usr/bin/env bash
#===- bench/run_import.sh - time and measure ONNX import ------------------===#
# Usage: bench/run_import.sh OASR_TRANSLATE MODELS_DIR [PYTHON] [OUT_PREFIX]
#
# For each real model (exported by scripts/export_models.py in PyTorch's
# training mode, opset 14, cached in MODELS_DIR): runs
# `oasr-translate --import-onnx MODEL --batch=32 --quiet` (load, shape
# inference, IR construction, verification; no printing) REPEAT times and
# reports the median wall time and the largest peak RSS (GNU time), then one
# run that also prints the IR. The baseline row imports a one-node text
# model: process start-up plus the shared MLIR/LLVM/ONNX libraries.
# Writes OUT_PREFIX.md and OUT_PREFIX.json (default bench/results/import).
set -euo pipefail
TRANSLATE=${1:?oasr-translate binary}
MODELS=${2:?models directory}
PYTHON=${3:-/usr/bin/python3}
OUT=${4:-$(dirname "$0")/results/import}
REPEAT=${REPEAT:-5}
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/.." && pwd)
MODEL_LIST=${MODEL_LIST:-resnet18,resnet50,vgg16,alexnet,googlenet,inception_v3,densenet121,mobilenet_v2,transformer}

"$PYTHON" "$SRC/scripts/export_models.py" "$MODELS" --opset 14 --models "$MODEL_LIST" >&2

# measure FILE [ARGS...] -> "median_wall_s max_rss_kb median_in_process_s"
measure() {
  local file=$1; shift
  local walls=() inproc=() rss=0
  for _ in $(seq "$REPEAT"); do
    local out line
    out=$( { /usr/bin/time -f "%e %M" "$TRANSLATE" --import-onnx "$file" --print-import-time "$@" >/dev/null; } 2>&1)
    line=$(echo "$out" | tail -1)
    walls+=("${line% *}")
    inproc+=("$(echo "$out" | sed -n 's/^import-time-s: //p')")
    local r=${line#* }
    (( r > rss )) && rss=$r
  done
  echo "$(median "${walls[@]}") $rss $(median "${inproc[@]}")"
}
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

rows=()
read -r base_wall base_rss base_in < <(measure "$SRC/test/Import/Inputs/relu.txtpb" --quiet)
rows+=("baseline 0 0 0 $base_wall $base_rss $base_wall $base_in")
for m in ${MODEL_LIST//,/ }; do
  f="$MODELS/$m.onnx"
  bytes=$(stat -c %s "$f")
  nodes=$("$TRANSLATE" --import-onnx "$f" --batch=32 | grep -c 'oasr.node' || true)
  params=$("$PYTHON" -c "import json,sys; print(json.load(open(sys.argv[1]))['params'])" "$MODELS/$m.json")
  read -r wall rss inproc < <(measure "$f" --batch=32 --quiet)
  read -r pwall _ _ < <(REPEAT=1 measure "$f" --batch=32)
  rows+=("$m $bytes $nodes $params $wall $rss $pwall $inproc")
  echo "$m: ${wall}s (in process ${inproc}s) ${rss}KB (file $bytes bytes)" >&2
done

"$PYTHON" - "$OUT" "$base_rss" "${rows[@]}" <<'PY'
import json, os, platform, subprocess, sys, datetime
out, base_rss, rows = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
cpu = "unknown"
try:
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip(); break
except OSError:
    pass
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                        text=True).stdout.strip()
goals = {"resnet50": 1.0, "vgg16": 3.0}
results = []
for r in rows:
    name, size, nodes, params, wall, rss, pwall, inproc = r.split()
    size, rss = int(size), int(rss) * 1024
    results.append({"model": name, "file_bytes": size, "nodes": int(nodes), "params": int(params),
                    "import_verify_s": float(wall), "import_verify_print_s": float(pwall),
                    "in_process_import_verify_s": float(inproc),
                    "peak_rss_bytes": rss, "rss_over_baseline_bytes": rss - base_rss * 1024,
                    "rss_per_file_size": round(rss / size, 3) if size else None,
                    "time_goal_s": goals.get(name)})
meta = {"date": datetime.date.today().isoformat(), "commit": commit, "cpu": cpu,
        "cores": os.cpu_count(), "batch": 32, "opset": 14, "page_cache": "warm",
        "tool": "oasr-translate --import-onnx MODEL --batch=32 --quiet (median of runs)"}
with open(out + ".json", "w") as f:
    json.dump({"meta": meta, "results": results}, f, indent=1)
with open(out + ".md", "w") as f:
    f.write("# ONNX import benchmark\n\n")
    f.write(f"{meta['date']}, commit {commit}, {cpu}, {meta['cores']} cores; page cache warm.\n")
    f.write("`oasr-translate --import-onnx MODEL --batch=32 --quiet`: load, shape inference, IR,\n"
            "verification (median wall time of the whole process, and of the importONNX call\n"
            "alone: `in-process`); `+print` also prints the IR.\n"
            "Peak RSS is the whole process (GNU time); `baseline` imports a one-node text\n"
            "model, i.e. process start-up and the shared MLIR/LLVM/ONNX libraries.\n\n")
    f.write("| model | file MB | nodes | params | import+verify s | in-process s | +print s | peak RSS MB | over baseline MB | RSS / file |\n")
    f.write("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
    for r in results:
        ratio = f"{r['rss_per_file_size']:.2f}" if r["rss_per_file_size"] else "-"
        goal = f" (goal < {r['time_goal_s']:g})" if r["time_goal_s"] else ""
        f.write(f"| {r['model']} | {r['file_bytes'] / 1e6:.1f} | {r['nodes']} | {r['params']} | "
                f"{r['import_verify_s']:.2f}{goal} | {r['in_process_import_verify_s']:.4f} | "
                f"{r['import_verify_print_s']:.2f} | "
                f"{r['peak_rss_bytes'] / 2**20:.1f} | {r['rss_over_baseline_bytes'] / 2**20:.1f} | {ratio} |\n")
print(open(out + ".md").read())
PY
