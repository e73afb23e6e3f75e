#!/usr/bin/env bash
#===- bench/run_planner.sh - Build and run the planner benchmark ----------===#
# Usage: bench/run_planner.sh [BUILD_DIR]   (default: build)
# Writes bench/results/planner.json (Google Benchmark JSON), planner.txt
# (console output) and planner.md (summary with the machine it ran on).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
out="$root/bench/results"
mkdir -p "$out"
ninja -C "$build" oasr-bench-planner
"$build/bench/oasr-bench-planner" --benchmark_min_time=0.2 \
  --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
  --benchmark_out="$out/planner.json" --benchmark_out_format=json \
  | tee "$out/planner.txt"

/usr/bin/python3 - "$out/planner.json" "$out/planner.md" <<'PY'
import json, subprocess, sys, datetime
data = json.load(open(sys.argv[1]))
cpu = subprocess.run("lscpu | grep 'Model name' | sed 's/.*: *//'", shell=True,
                     capture_output=True, text=True).stdout.strip()
nproc = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip()
rows = {}
for b in data["benchmarks"]:
    if b.get("aggregate_name") != "median":
        continue
    name, n = b["run_name"].split("/")
    rows.setdefault(name, {})[int(n)] = b["real_time"]  # microseconds
sizes = sorted({n for r in rows.values() for n in r})
with open(sys.argv[2], "w") as f:
    f.write("# Planner speed\n\n")
    f.write(f"Machine: {cpu}, {nproc} cores (shared with other jobs); "
            f"date {datetime.date.today()}; median of 3 repetitions, wall time "
            "in microseconds per plan (including building the ready order).\n")
    f.write("Synthetic CNN-like profiles (weight + bias per layer); 600 tensors "
            "= 300 layers. Produced by `bench/run_planner.sh`.\n\n")
    f.write("| benchmark | " + " | ".join(f"{n} tensors" for n in sizes) + " |\n")
    f.write("|---|" + "---|" * len(sizes) + "\n")
    for name, r in rows.items():
        cells = [f"{r[n]:.1f}" if n in r else "-" for n in sizes]
        f.write(f"| {name} | " + " | ".join(cells) + " |\n")
    f.write("\nTargets (issue 4): optimal at 300 layers < 5 ms; 10^5 tensors < 1 s.\n")
    f.write("\nEnd to end, reading included (issue 15: a 10^5-tensor profile planned in "
            "under 0.3 s, process start included): planner-json.md, "
            "`bench/run_plan_json.sh`.\n")
print(open(sys.argv[2]).read())
PY
