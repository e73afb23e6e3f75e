#!/usr/bin/python3
"""Does oasr need the cluster script's extras? ResNet-18 on 2 emulated nodes.

    bench/run_launch.py [--build BUILD] [--model resnet18] [--batch 4]
                        [--steps 12] [--rounds 2] [--rate 1gbit] [--name NAME]

Three launches of the same oasr-run job on scripts/cluster.sh's 2 nodes,
alternating within each round:
  tuned:    `cluster.sh run` as it is (its allreduce rules on mpirun's
            command line);
  plain:    `cluster.sh run --plain`, as a user's own `mpirun -H a,b` would
            launch: oasr-run sets the same rules itself before MPI_Init;
  defaults: plain, with OMPI_MCA_coll_tuned_use_dynamic_rules=0 in the
            environment, so Open MPI chooses its algorithms itself (what the
            rules buy).
Each cell is the median over rounds of oasr-run's median step, with the
fastest and slowest round. Needs root (network namespaces). Writes
bench/results/NAME.json and .md (NAME: launch-MODEL-DATE); never overwrites.
"""
import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys

import results_io

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLUSTER = os.path.join(ROOT, "scripts", "cluster.sh")
STEP_RE = re.compile(r"mean iteration\s+([0-9.]+) ms \(median ([0-9.]+) ms")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--model", default="resnet18")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--rate", default="1gbit")
    p.add_argument("--name", default="")
    a = p.parse_args()
    date = datetime.datetime.now(datetime.timezone.utc)
    name = a.name or f"launch-{a.model}-{date:%Y-%m-%d}"
    out = results_io.new_results(p, name)
    onnx, = results_io.exported_models(a.build, a.model)
    env = dict(os.environ, OASR_CLUSTER="launch%d" % os.getpid())
    up = subprocess.run([CLUSTER, "up", "2", f"--rate={a.rate}"], env=env,
                        capture_output=True, text=True)
    if up.returncode != 0:
        sys.exit("run_launch: cluster.sh up failed:\n" + up.stderr)
    loads, runs = [open("/proc/loadavg").read().split()[0]], {}
    try:
        cmd = [os.path.join(a.build, "bin", "oasr-run"), onnx, f"--batch={a.batch}",
               f"--steps={a.steps}", "--threads=1", f"--log-every={a.steps}"]
        for r in range(a.rounds):
            for kind in ("tuned", "plain", "defaults"):
                # "defaults": the variable in each rank's environment, as a
                # user's own setting would be.
                rank_env = (["env", "OMPI_MCA_coll_tuned_use_dynamic_rules=0"]
                            if kind == "defaults" else [])
                launch = ([CLUSTER, "run", "2"] + (["--plain"] if kind != "tuned" else [])
                          + ["--"] + rank_env + cmd)
                res = subprocess.run(launch, env=env, capture_output=True, text=True)
                m = STEP_RE.search(res.stdout)
                if res.returncode != 0 or not m:
                    sys.exit(f"run_launch: {kind} run failed:\n" + (res.stdout + res.stderr)[-3000:])
                note = next((l for l in res.stdout.splitlines() if "collectives:" in l), "")
                runs.setdefault(kind, []).append({"median_ms": float(m.group(2)),
                                                  "mean_ms": float(m.group(1)),
                                                  "collectives": note})
                print(f"round {r + 1} {kind}: {m.group(2)} ms  {note}", flush=True)
            loads.append(open("/proc/loadavg").read().split()[0])
    finally:
        subprocess.run([CLUSTER, "down"], env=env, capture_output=True)
    cells = {k: {"median": statistics.median(x["median_ms"] for x in v),
                 "min": min(x["median_ms"] for x in v),
                 "max": max(x["median_ms"] for x in v)} for k, v in runs.items()}
    res = {"benchmark": "launch", "date": date.isoformat(timespec="minutes"),
           "machine": {"cores": os.cpu_count(), "load_1min": loads},
           "model": a.model, "batch": a.batch, "steps": a.steps, "rounds": a.rounds,
           "rate": a.rate, "command": "bench/run_launch.py " + " ".join(sys.argv[1:]),
           "runs": runs, "cells": cells}
    with open(out + ".json", "w") as f:
        json.dump(res, f, indent=1)
    t = cells["tuned"]["median"]
    lines = [f"# Launching oasr-run on 2 emulated nodes: {a.model}, batch {a.batch}, {a.rate}", "",
             f"{res['date']}, {os.cpu_count()} cores, load (1 min) {', '.join(loads)}. "
             f"{a.steps} steps a run, {a.rounds} rounds, launches alternating. Cells: "
             "median over rounds of oasr-run's median step [fastest - slowest round]. "
             "Produced by `" + res["command"] + "`.", "",
             "| launch | step (ms) | against tuned | what set the allreduce choices |",
             "|---|---|---|---|"]
    what = {"tuned": "cluster.sh's --mca options on mpirun",
            "plain": "oasr-run, before MPI_Init (no --mca options)",
            "defaults": "nobody: Open MPI's own (OMPI_MCA_coll_tuned_use_dynamic_rules=0)"}
    for k in ("tuned", "plain", "defaults"):
        c = cells[k]
        lines.append(f"| {k} | {c['median']:.1f} [{c['min']:.1f}-{c['max']:.1f}] | "
                     f"{c['median'] / t:.2f}x | {what[k]} |")
    with open(out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
