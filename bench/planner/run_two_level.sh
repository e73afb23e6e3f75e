#!/usr/bin/env bash
#===- bench/planner/run_two_level.sh - Two-level routes on profiles --------===#
# Usage: bench/planner/run_two_level.sh NAME CALIBRATION [BUILD_DIR] [FROM]
# Plans every examples/profiles/*.json with `oasr-plan` under CALIBRATION, a
# calibration with a second tier (`oasr-bench comm` on ranks that share
# nodes: its 'two_level'), at compute scale 1 and 0.05 (a ~20x faster
# device): oasr and wfbp with every group one collective (--two-level=flat)
# against the same strategies choosing the route per group (auto). These
# are the model's predictions, not measurements (docs/compression.md, "The
# two-level allreduce"). Writes bench/results/NAME.{md,json}; refuses to
# overwrite them. FROM says where CALIBRATION was measured (the results
# file whose run calibrated it), for the report.
set -euo pipefail
name="${1:?usage: run_two_level.sh NAME CALIBRATION [BUILD_DIR]}"
cal="${2:?usage: run_two_level.sh NAME CALIBRATION [BUILD_DIR]}"
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${3:-$root/build}"
from="${4:-}"
out="$root/bench/results/$name"
. "$root/bench/lib.sh"
for f in "$out.md" "$out.json"; do bench_fresh_out run_two_level.sh "$f"; done
plan="$build/bin/oasr-plan"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
for scale in 1 0.05; do
  for p in "$root"/examples/profiles/*.json; do
    m=$(basename "$p" .json)
    for route in flat auto; do
      "$plan" "$p" --format=json --compute-scale=$scale --strategy=wfbp,oasr \
        --comm="$cal" --two-level=$route > "$tmp/$scale--$m--$route.json"
    done
  done
done
/usr/bin/python3 - "$tmp" "$out" "$(git -C "$root" rev-parse --short HEAD)" "$cal" "$from" <<'PY'
import datetime, glob, json, os, subprocess, sys
tmp, out, commit, cal, src = sys.argv[1:6]
cpu = subprocess.run("lscpu | grep 'Model name' | sed 's/.*: *//'", shell=True,
                     capture_output=True, text=True).stdout.strip()
c = json.load(open(cal))
t = c["two_level"]
runs = {}
for f in sorted(glob.glob(os.path.join(tmp, "*.json"))):
    scale, model, route = os.path.basename(f)[:-5].split("--")
    runs.setdefault(scale, {}).setdefault(model, {})[route] = json.load(open(f))
doc = {"date": str(datetime.date.today()), "machine": cpu, "commit": commit,
       "calibration": os.path.basename(cal), "measured_in": src, "ranks": c["ranks"],
       "flat": {"alpha_s": c["alpha_s"], "beta_s_per_byte": c["beta_s_per_byte"]},
       "two_level": {k: t[k] for k in ("ranks_per_node",)} |
       {k: {"alpha_s": t[k]["alpha_s"], "beta_s_per_byte": t[k]["beta_s_per_byte"]}
        for k in ("intra", "inter")},
       "scales": {}}
with open(out + ".md", "w") as o:
    o.write("# Two-level allreduce routes on measured profiles (the model's predictions)\n\n")
    o.write(f"{datetime.date.today()}, {cpu}, oasr {commit}. Produced by "
            "`bench/planner/run_two_level.sh` (`oasr-plan --two-level`, "
            "docs/compression.md). Model: the calibration "
            f"`{os.path.basename(cal)}`" + (f" (measured in {src})" if src else "")
            + f" ({c['ranks']} ranks, {t['ranks_per_node']} a node): "
            f"flat alpha {c['alpha_s']:.3g} s, beta {c['beta_s_per_byte']:.3g} s/B; "
            f"inside the node alpha {t['intra']['alpha_s']:.3g} s, beta "
            f"{t['intra']['beta_s_per_byte']:.3g} s/B; between the nodes alpha "
            f"{t['inter']['alpha_s']:.3g} s, beta {t['inter']['beta_s_per_byte']:.3g} "
            "s/B per share byte. Times in ms per iteration, predicted; `groups "
            "2L` is how many of the plan's groups go two-level.\n\n")
    for scale in sorted(runs, key=float, reverse=True):
        o.write(f"## Compute scale {scale}\n\n")
        o.write("| model | wfbp flat | wfbp auto | oasr flat | oasr auto | groups 2L (oasr auto) | oasr auto / flat |\n")
        o.write("|---|---|---|---|---|---|---|\n")
        rows = {}
        for model, r in sorted(runs[scale].items()):
            s = {route: {x["name"]: x for x in r[route]["strategies"]} for route in r}
            fw, aw = s["flat"]["wfbp"], s["auto"]["wfbp"]
            fo, ao = s["flat"]["oasr"], s["auto"]["oasr"]
            gain = fo["iteration_us"] / ao["iteration_us"]
            rows[model] = {"wfbp_flat_us": fw["iteration_us"], "wfbp_auto_us": aw["iteration_us"],
                           "oasr_flat_us": fo["iteration_us"], "oasr_auto_us": ao["iteration_us"],
                           "oasr_auto_groups": ao["num_groups"],
                           "oasr_auto_two_level_groups": ao["two_level_groups"],
                           "gain": gain}
            o.write(f"| {model} | {fw['iteration_us']/1e3:.1f} | {aw['iteration_us']/1e3:.1f} | "
                    f"{fo['iteration_us']/1e3:.1f} | {ao['iteration_us']/1e3:.1f} | "
                    f"{ao['two_level_groups']} of {ao['num_groups']} | {gain:.2f}x |\n")
        o.write("\n")
        doc["scales"][scale] = rows
json.dump(doc, open(out + ".json", "w"), indent=1)
print(open(out + ".md").read())
PY
