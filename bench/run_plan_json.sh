#!/usr/bin/env bash
#===- bench/run_plan_json.sh - oasr-plan end to end on a 10^5-tensor profile ===#
# Usage: bench/run_plan_json.sh BEFORE_BIN AFTER_BIN RUNS OUT.md
#
# Times `oasr-plan PROFILE` (every strategy, table output, process start
# included) on a synthetic 10^5-tensor profile (10.8 MB, written by
# bench/planner/gen_synthetic_profile.py), running the two binaries in
# turn (A B A B ...) so that load on the host hits both alike, and checks
# they print the same table. Writes OUT.md, which must not exist (results
# files are never overwritten); the labels of the two binaries come from
# $BEFORE_LABEL and $AFTER_LABEL.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
root="$ROOT"
. "$ROOT/bench/lib.sh"
before="$1" after="$2" runs="$3" out="$4"
bench_fresh_out run_plan_json "$out"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 "$root/bench/planner/gen_synthetic_profile.py" \
  "$work/p100k.json" --tensors 100000
/usr/bin/python3 - "$before" "$after" "$runs" "$work/p100k.json" "$out" <<'PY'
import datetime, os, statistics, subprocess, sys, time
before, after, runs, profile, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
def run(binary):
    t0 = time.perf_counter()
    p = subprocess.run([binary, profile], capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"{binary} failed: {p.stderr}")
    return dt, p.stdout
def peak_rss_mb(binary):
    # One more run, alone, to read its peak resident set (kernel accounting).
    p = subprocess.Popen([binary, profile], stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    return usage.ru_maxrss / 1024.0
times = {"before": [], "after": []}
outputs = {}
load = [os.getloadavg()[0]]
for _ in range(runs):
    for name, b in (("before", before), ("after", after)):
        dt, text = run(b)
        times[name].append(dt)
        outputs[name] = text
    load.append(os.getloadavg()[0])
if outputs["before"] != outputs["after"]:
    sys.exit("the two binaries print different tables")
cpu = subprocess.run("lscpu | grep 'Model name' | sed 's/.*: *//'", shell=True,
                     capture_output=True, text=True).stdout.strip()
size = os.path.getsize(profile)
rss = {"before": peak_rss_mb(before), "after": peak_rss_mb(after)}
def row(name):
    t = times[name]
    return (f"| {name} | {statistics.median(t):.3f} | {min(t):.3f}-{max(t):.3f} "
            f"| {rss[name]:.0f} |")
with open(out, "x") as f:
    f.write("# oasr-plan end to end on a 10^5-tensor profile\n\n")
    f.write(f"Machine: {cpu}, {os.cpu_count()} cores shared with other builds; "
            f"date {datetime.date.today()}; load average (1 min) "
            f"{min(load):.2f}-{max(load):.2f} during the runs.\n")
    f.write(f"Profile: bench/planner/gen_synthetic_profile.py, 100,000 tensors in "
            f"50,000 layers, {size / 1e6:.1f} MB. Command: `oasr-plan PROFILE` "
            "(all seven strategies scored, table printed), wall time of the "
            f"process, {runs} runs each, interleaved A/B. Both print the same table.\n")
    f.write(f"Produced by `bench/run_plan_json.sh BEFORE AFTER {runs} OUT`.\n\n")
    f.write(f"- before: {os.environ.get('BEFORE_LABEL', before)}\n")
    f.write(f"- after: {os.environ.get('AFTER_LABEL', after)}\n\n")
    f.write("| oasr-plan | median (s) | range (s) | peak RSS (MB) |\n"
            "|---|---|---|---|\n")
    f.write(row("before") + "\n" + row("after") + "\n")
print(open(out).read())
PY
