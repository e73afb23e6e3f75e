#!/usr/bin/env bash
# Runtime benchmark, one rank: oasr-run vs PyTorch CPU on ResNet-18 and
# ResNet-50 (batch 16, same threads, same model exported by
# scripts/export_models.py). Step time = mean over the steps after the
# first; peak RSS from /usr/bin/time (oasr-run) and getrusage (PyTorch).
#
#   bench/run_runtime.sh [BUILD_DIR] [STEPS] [THREADS]
#
# Writes bench/results/runtime.json and bench/results/runtime.md.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
STEPS=${2:-4}
THREADS=${3:-2}
BATCH=16
PY=/usr/bin/python3
MODELS=$BUILD/bench-models
OUT=$ROOT/bench/results
mkdir -p "$MODELS" "$OUT"
$PY "$ROOT/scripts/export_models.py" "$MODELS" --models resnet18,resnet50 >/dev/null 2>&1

rows=()
for m in resnet18 resnet50; do
  log=$(mktemp)
  /usr/bin/time -v "$BUILD/bin/oasr-run" "$MODELS/$m.onnx" --batch=$BATCH \
    --steps=$STEPS --threads=$THREADS --quiet >"$log" 2>"$log.time"
  oasr_ms=$(awk '/mean iteration/ {print $3}' "$log")
  oasr_rss=$(awk '/Maximum resident/ {print $6 * 1024}' "$log.time")
  torch=$($PY "$ROOT/bench/runtime.py" $m --batch $BATCH --threads $THREADS --steps $STEPS)
  torch_s=$(echo "$torch" | $PY -c 'import json,sys; print(json.load(sys.stdin)["step_s"])')
  torch_rss=$(echo "$torch" | $PY -c 'import json,sys; print(json.load(sys.stdin)["peak_rss_bytes"])')
  rows+=("{\"model\": \"$m\", \"oasr_step_s\": $(awk "BEGIN{print $oasr_ms/1000}"), \"oasr_peak_rss_bytes\": $oasr_rss, \"torch_step_s\": $torch_s, \"torch_peak_rss_bytes\": $torch_rss}")
  rm -f "$log" "$log.time"
done

machine="$(uname -m), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1 /proc/loadavg)"
date=$(date -u +%Y-%m-%dT%H:%MZ)
{
  echo "{\"benchmark\": \"runtime-1rank\", \"date\": \"$date\", \"machine\": \"$machine\","
  echo " \"batch\": $BATCH, \"threads\": $THREADS, \"steps\": $STEPS, \"results\": ["
  (IFS=$',\n'; echo "  ${rows[*]}")
  echo "]}"
} > "$OUT/runtime.json"
$PY - "$OUT/runtime.json" > "$OUT/runtime.md" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
print(f"# Runtime, one rank: oasr-run vs PyTorch CPU\n")
print(f"{d['date']}, {d['machine']}; batch {d['batch']}, {d['threads']} threads, "
      f"mean of steps 2..{d['steps']}. Goal: step time <= 1.0x PyTorch, RSS <= PyTorch.\n")
print("| model | oasr step (s) | PyTorch step (s) | ratio | oasr peak RSS (MiB) | PyTorch peak RSS (MiB) | ratio |")
print("|---|---|---|---|---|---|---|")
for r in d["results"]:
    print(f"| {r['model']} | {r['oasr_step_s']:.3f} | {r['torch_step_s']:.3f} | "
          f"{r['oasr_step_s']/r['torch_step_s']:.2f}x | {r['oasr_peak_rss_bytes']/2**20:.0f} | "
          f"{r['torch_peak_rss_bytes']/2**20:.0f} | {r['oasr_peak_rss_bytes']/r['torch_peak_rss_bytes']:.2f}x |")
PYEOF
cat "$OUT/runtime.md"
