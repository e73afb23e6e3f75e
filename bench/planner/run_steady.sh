#!/usr/bin/env bash
#===- bench/planner/run_steady.sh - The steady-state step on real profiles -===#
# Usage: bench/planner/run_steady.sh [BUILD_DIR]   (default: build)
# Plans every examples/profiles/*.json at compute scale 0.05 (a ~20x faster
# device) on four networks with `oasr-plan --steady` and writes
# bench/results/planner-steady.md: today's oasr (backward-only model, the
# next forward waits for every allreduce), the baselines of the wider model
# (ByteScheduler, DeAR), oasr-step, and the steady-state lower bound.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-$root/build}"
out="$root/bench/results/planner-steady.md"
plan="$build/bin/oasr-plan"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
i=0
for net in "IB-8 --alpha=9.75e-5 --beta=3.06e-10" \
           "10GbE-16 --alpha=9.08e-4 --beta=7.40e-10" \
           "1GbE-8 --alpha=1e-4 --beta=1.4e-8" \
           "emulated-200Mbit --alpha=0 --beta=5.67e-8"; do
  set -- $net
  name=$1; shift
  for p in "$root"/examples/profiles/*.json; do
    i=$((i + 1))
    "$plan" "$p" --format=json --compute-scale=0.05 --strategy=oasr --steady "$@" \
      > "$tmp/$(printf %03d $i)-$name.json"
  done
done
/usr/bin/python3 - "$tmp" "$out" <<'PY'
import datetime, glob, json, os, subprocess, sys
tmp, out = sys.argv[1:3]
cpu = subprocess.run("lscpu | grep 'Model name' | sed 's/.*: *//'", shell=True,
                     capture_output=True, text=True).stdout.strip()
nets = {"IB-8": "alpha 9.75e-5 s, beta 3.06e-10 s/B (MG-WFBP's 8-worker 56 Gb InfiniBand)",
        "10GbE-16": "alpha 9.08e-4 s, beta 7.40e-10 s/B (MG-WFBP's 16-worker 10 GbE)",
        "1GbE-8": "alpha 1e-4 s, beta 1.4e-8 s/B (a ring over 1 Gbit/s links, 8 ranks)",
        "emulated-200Mbit": "alpha 0, beta 5.67e-8 s/B (scripts/cluster.sh at 200 Mbit/s, as calibrated in cluster-resnet18-2x200mbit.md)"}
rows, order = {}, []
for f in sorted(glob.glob(os.path.join(tmp, "*.json"))):
    net = os.path.basename(f)[4:-5]
    if net not in order:
        order.append(net)
    rows.setdefault(net, []).append(json.load(open(f)))
total_ms = 0
with open(out, "w") as o:
    o.write("# The steady-state step on measured profiles\n\n")
    o.write(f"{datetime.date.today()}, {cpu}. Produced by `bench/planner/run_steady.sh` "
            "(`oasr-plan --steady`, docs/planner.md \"The steady-state step\"). "
            "The profiles of `examples/profiles` at compute scale 0.05 (a ~20x faster "
            "device); per-layer forward times split from the profile's forward in "
            "proportion to backward. Times in ms per iteration (the steady-state period); "
            "in brackets the speed-up over today's `oasr`. *comm-bound*: allreducing "
            "every gradient once (alpha + beta M) takes at least half of forward + backward.\n")
    for net in order:
        o.write(f"\n## {net}: {nets[net]}\n\n")
        o.write("| model | comm-bound | oasr (today) | bytescheduler | dear | oasr-step | oasr-step plan | lower bound | gap | plan ms |\n")
        o.write("|---|---|---|---|---|---|---|---|---|---|\n")
        for d in rows[net]:
            st = {s["name"].split(":")[0]: s for s in d["steady"]["strategies"]}
            oasr = d["steady"]["oasr_iteration_us"]
            comm = d["comm"]
            allreduce = comm["alpha_s"] * 1e6 + comm["beta_s_per_byte"] * 1e6 * d["total_bytes"]
            compute = d["strategies"][0]["backward_end_us"]
            bound = d["steady"]["lower_bound_us"]
            def cell(s):
                return f"{s['period_us']/1e3:.2f} ({oasr / s['period_us']:.3f}x)"
            step = st["oasr-step"]
            forms = sum(g["collective"] != "allreduce" for g in step["groups"])
            cut = sum(g["pieces"] > 1 for g in step["groups"])
            desc = f"{len(step['groups'])} groups, {step['priority'].replace('_', '-')}"
            if forms: desc += f", {forms} RS/AG"
            if cut: desc += f", {cut} cut"
            total_ms += step["plan_ms"]
            o.write(f"| {d['model']} | {'yes' if allreduce >= 0.5 * compute else 'no'} | "
                    f"{oasr/1e3:.2f} | {cell(st['bytescheduler'])} | {cell(st['dear'])} | "
                    f"{cell(step)} | {desc} | {bound/1e3:.2f} | "
                    f"{max(0.0, 100 * (step['period_us'] - bound) / bound):.2f}% | {step['plan_ms']:.0f} |\n")
print(open(out).read())
PY
