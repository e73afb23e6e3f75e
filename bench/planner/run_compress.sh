#!/usr/bin/env bash
#===- bench/planner/run_compress.sh - Planned compression on profiles ------===#
# Usage: bench/planner/run_compress.sh NAME [BUILD_DIR]   (default: build)
# Plans every examples/profiles/*.json at compute scale 0.05 (a ~20x faster
# device) on the emulated cluster's 200 Mbit/s link and on 1 Gbit/s, with
# `oasr-plan`: today's best uncompressed plans (oasr, and the steady-state
# oasr-step) against oasr with --compress=auto:R-R (PowerSGD at rank R,
# default 8, where the model says a group's factors end sooner, grouping
# chosen with the forms), --compress=auto:R (the same, ranks raised where the
# step hides them), the steady-state oasr-step under --compress=auto:R (the
# next forward waiting per layer; groups, forms and order chosen together)
# and --compress=powersgd:R (every group that can). R is
# $OASR_COMPRESS_RANK (default 8; runs before 2026-11-28 used 4 and had no
# raised ranks). These are the model's
# predictions, not measurements (docs/compression.md). Writes
# bench/results/NAME.{md,json}; refuses to overwrite them.
set -euo pipefail
name="${1:?usage: run_compress.sh NAME [BUILD_DIR]}"
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${2:-$root/build}"
out="$root/bench/results/$name"
for f in "$out.md" "$out.json"; do
  if [ -e "$f" ]; then
    echo "$f exists: results files are never overwritten" >&2
    exit 1
  fi
done
plan="$build/bin/oasr-plan"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
rank="${OASR_COMPRESS_RANK:-8}"
for net in "emulated-200Mbit --alpha=0 --beta=5.67e-8" \
           "1GbE-2 --alpha=5.3e-4 --beta=8.0e-9"; do
  set -- $net
  net=$1; shift
  for p in "$root"/examples/profiles/*.json; do
    m=$(basename "$p" .json)
    "$plan" "$p" --format=json --compute-scale=0.05 --strategy=oasr --steady "$@" \
      > "$tmp/$net--$m--off.json"
    for c in auto:$rank-$rank auto:$rank powersgd:$rank; do
      steady=()
      [ "$c" = "auto:$rank" ] && steady=(--steady=oasr-step)
      "$plan" "$p" --format=json --compute-scale=0.05 --strategy=oasr \
        "${steady[@]}" --compress=$c "$@" > "$tmp/$net--$m--$c.json"
    done
  done
done
/usr/bin/python3 - "$tmp" "$out" "$(git -C "$root" rev-parse --short HEAD)" "$rank" <<'PY'
import datetime, glob, json, os, subprocess, sys
tmp, out, commit, rank = sys.argv[1:5]
R = int(rank)
cpu = subprocess.run("lscpu | grep 'Model name' | sed 's/.*: *//'", shell=True,
                     capture_output=True, text=True).stdout.strip()
nets = {"emulated-200Mbit": "alpha 0, beta 5.67e-8 s/B (scripts/cluster.sh at 200 Mbit/s, as calibrated in cluster-resnet18-2x200mbit.md)",
        "1GbE-2": "alpha 5.3e-4 s, beta 8.0e-9 s/B (2 nodes at 1 Gbit/s, as calibrated in cluster-bert_base-2x1gbit-bf16-ampbf16.md)"}
runs = {}
for f in sorted(glob.glob(os.path.join(tmp, "*.json"))):
    net, model, config = os.path.basename(f)[:-5].split("--")
    runs.setdefault(net, {}).setdefault(model, {})[config] = json.load(open(f))
doc = {"date": str(datetime.date.today()), "machine": cpu, "commit": commit,
       "compute_scale": 0.05, "rank": R, "networks": {}}
with open(out + ".md", "w") as o:
    o.write("# Planned compression on measured profiles (the model's predictions)\n\n")
    o.write(f"{datetime.date.today()}, {cpu}, oasr {commit}. Produced by "
            "`bench/planner/run_compress.sh` (`oasr-plan --compress`, "
            "docs/compression.md). The profiles of `examples/profiles` at compute "
            "scale 0.05 (a ~20x faster device). PowerSGD's compute is charged at "
            "one core of the build machine (46 G multiply-adds/s, 17 GB/s over the "
            "matrices). Times in ms per iteration, predicted; in brackets the "
            "speed-up over `oasr-step`, today's best uncompressed plan. "
            "What compression does to accuracy is not in these numbers.\n")
    for net, models in runs.items():
        o.write(f"\n## {net}: {nets[net]}\n\n")
        o.write(f"| model | gradients (MB) | oasr | oasr-step | oasr auto:{R}-{R} | "
                f"groups compressed | oasr auto:{R} (ranks raised) | groups raised | "
                f"oasr-step auto:{R} | its gain over oasr auto:{R} | "
                f"oasr powersgd:{R} |\n")
        o.write("|---|---|---|---|---|---|---|---|---|---|---|\n")
        doc["networks"][net] = {}
        for model, c in models.items():
            off = c["off"]
            oasr = off["strategies"][0]["iteration_us"]
            step = next(s for s in off["steady"]["strategies"]
                        if s["name"].startswith("oasr-step"))["period_us"]
            fixed = c[f"auto:{R}-{R}"]["strategies"][0]
            auto = c[f"auto:{R}"]["strategies"][0]
            forced = c[f"powersgd:{R}"]["strategies"][0]
            steady = c[f"auto:{R}"]["steady"]["strategies"][0]
            raised = [f for f in (auto.get("forms") or [])
                      if f.startswith("powersgd:") and int(f.split(":")[1]) > R]
            cell = lambda us: f"{us/1e3:.1f} ({step/us:.2f}x)"
            o.write(f"| {model} | {off['total_bytes']/1e6:.1f} | {oasr/1e3:.1f} | "
                    f"{step/1e3:.1f} | {cell(fixed['iteration_us'])} | "
                    f"{fixed['compressed_groups']} of {fixed['num_groups']} | "
                    f"{cell(auto['iteration_us'])} | "
                    f"{len(raised)} of {auto['compressed_groups']} "
                    f"({', '.join(sorted(set(raised), key=lambda f: int(f.split(':')[1]))) or '-'}) | "
                    f"{cell(steady['period_us'])} | "
                    f"{auto['iteration_us'] / steady['period_us']:.3f}x | "
                    f"{cell(forced['iteration_us'])} |\n")
            doc["networks"][net][model] = {
                "oasr_us": oasr, "oasr_step_us": step,
                "fixed_rank_us": fixed["iteration_us"],
                "fixed_rank_compressed_groups": fixed["compressed_groups"],
                "auto_us": auto["iteration_us"],
                "auto_groups": auto["num_groups"],
                "auto_compressed_groups": auto["compressed_groups"],
                "auto_forms": auto.get("forms"),
                "steady_auto_us": steady["period_us"],
                "steady_auto_groups": len(steady["groups"]),
                "steady_auto_forms": [g["form"] for g in steady["groups"]],
                "powersgd_us": forced["iteration_us"]}
json.dump(doc, open(out + ".json", "w"), indent=1)
print(open(out + ".md").read())
PY
