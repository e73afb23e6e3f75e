#!/usr/bin/python3
"""One-rank runtime benchmark: oasr-run against PyTorch on the CPU.

    bench/run_runtime.py [--build BUILD] [--models resnet18,resnet50]
                         [--batch 16] [--threads 2] [--steps 4] [--rounds 3]
                         [--torch-python /root/venv-torch/bin/python]
                         [--name NAME]

The same torchvision models (scripts/export_models.py: no pretrained
weights, seed 0), the same batch and threads, SGD on random data. PyTorch is
PyPI's build (MKL and oneDNN) from a venv, f32, eager: the fastest peer that
installs here (Debian's torch has a generic BLAS and is refused unless
--allow-debian-torch is given). oasr and PyTorch alternate within each
round; each cell is the median over rounds of the mean step after the first,
with the fastest and slowest round. Writes bench/results/NAME.json and .md
(NAME defaults to runtime-1rank-DATE) and never overwrites a results file.
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


def load():
    return open("/proc/loadavg").read().split()[0]


def run_oasr(a, onnx):
    cmd = ["/usr/bin/time", "-v", os.path.join(a.build, "bin", "oasr-run"), onnx,
           f"--batch={a.batch}", f"--steps={a.steps}", f"--threads={a.threads}",
           "--quiet"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    m = re.search(r"mean iteration\s+([0-9.]+) ms", p.stdout)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
    if p.returncode != 0 or not m:
        sys.exit(f"run_runtime: oasr-run failed on {onnx} (exit {p.returncode}):\n"
                 + (p.stdout + p.stderr)[-2000:])
    return float(m.group(1)) / 1e3, int(rss.group(1)) * 1024 if rss else None


def run_torch(a, model):
    cmd = [a.torch_python, os.path.join(ROOT, "bench", "runtime.py"), model,
           "--batch", str(a.batch), "--threads", str(a.threads), "--steps", str(a.steps)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"run_runtime: {a.torch_python} bench/runtime.py {model} failed:\n"
                 + p.stderr[-2000:])
    return json.loads(p.stdout.strip().splitlines()[-1])


def cell(xs):
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--models", default="resnet18,resnet50")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--torch-python", default="/root/venv-torch/bin/python")
    p.add_argument("--allow-debian-torch", action="store_true")
    p.add_argument("--name", default="")
    a = p.parse_args()
    if a.steps < 2 or a.rounds < 1:
        p.error("--steps must be >= 2 (the first is not timed) and --rounds >= 1")
    if not os.access(a.torch_python, os.X_OK):
        p.error(f"--torch-python={a.torch_python}: not an executable; create the "
                "venv with `python3 -m venv /root/venv-torch && "
                "/root/venv-torch/bin/pip install torch torchvision`")
    probe = subprocess.run([a.torch_python, "-c",
                            "import torch, json; print(json.dumps({'version': torch.__version__, "
                            "'mkl': torch.backends.mkl.is_available(), "
                            "'mkldnn': torch.backends.mkldnn.is_available()}))"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        p.error(f"--torch-python={a.torch_python}: cannot import torch:\n{probe.stderr[-500:]}")
    torch_info = json.loads(probe.stdout.strip().splitlines()[-1])
    if not torch_info["mkl"] and not a.allow_debian_torch:
        p.error(f"--torch-python={a.torch_python}: torch {torch_info['version']} has no "
                "MKL (Debian's build, generic BLAS); compare against PyPI's torch, or "
                "pass --allow-debian-torch and say so")
    date = datetime.datetime.now(datetime.timezone.utc)
    name = a.name or f"runtime-1rank-{date:%Y-%m-%d}"
    out = results_io.new_results(p, name)
    models = a.models.split(",")
    models_dir = os.path.dirname(results_io.exported_models(a.build, a.models)[0])
    loads = [load()]
    runs = {m: {"oasr": [], "torch": []} for m in models}
    for r in range(a.rounds):
        for m in models:
            o_s, o_rss = run_oasr(a, os.path.join(models_dir, m + ".onnx"))
            t = run_torch(a, m)
            runs[m]["oasr"].append({"step_s": o_s, "peak_rss_bytes": o_rss})
            runs[m]["torch"].append({"step_s": t["step_s"],
                                     "peak_rss_bytes": t["peak_rss_bytes"]})
            print(f"round {r + 1} {m}: oasr {o_s * 1e3:.1f} ms, torch "
                  f"{t['step_s'] * 1e3:.1f} ms", flush=True)
        loads.append(load())
    res = {"benchmark": "runtime-1rank", "date": date.isoformat(timespec="minutes"),
           "machine": {"cpu": subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"],
                                              capture_output=True, text=True).stdout.strip(),
                       "cores": os.cpu_count(), "load_1min": loads},
           "torch": torch_info, "batch": a.batch, "threads": a.threads,
           "steps": a.steps, "rounds": a.rounds,
           "command": "bench/run_runtime.py " + " ".join(sys.argv[1:]), "runs": runs,
           "cells": {m: {side: cell([x["step_s"] for x in runs[m][side]])
                         for side in ("oasr", "torch")} for m in models}}
    with open(out + ".json", "w") as f:
        json.dump(res, f, indent=1)
    lines = [f"# Runtime, one rank: oasr-run against PyTorch {torch_info['version']} (CPU)", "",
             f"{res['date']}; {res['machine']['cpu']}, {res['machine']['cores']} cores; "
             f"load (1 min) {', '.join(loads)} before and after each round. PyTorch: "
             f"{a.torch_python} (PyPI, MKL {torch_info['mkl']}, oneDNN "
             f"{torch_info['mkldnn']}), eager f32. Batch {a.batch}, {a.threads} threads, "
             f"{a.steps} steps a run (the first not timed), {a.rounds} rounds, oasr and "
             "PyTorch alternating. Cells: median over rounds of the mean step "
             "[fastest - slowest round]. Produced by `" + res["command"] + "`.", "",
             "| model | oasr step (ms) | PyTorch step (ms) | oasr / PyTorch | oasr peak RSS (MiB) | PyTorch peak RSS (MiB) |",
             "|---|---|---|---|---|---|"]
    for m in models:
        o, t = res["cells"][m]["oasr"], res["cells"][m]["torch"]
        rss = [statistics.median(x["peak_rss_bytes"] for x in runs[m][s]) / 2**20
               for s in ("oasr", "torch")]
        lines.append(f"| {m} | {o['median'] * 1e3:.1f} [{o['min'] * 1e3:.1f}-{o['max'] * 1e3:.1f}] | "
                     f"{t['median'] * 1e3:.1f} [{t['min'] * 1e3:.1f}-{t['max'] * 1e3:.1f}] | "
                     f"{o['median'] / t['median']:.2f}x | {rss[0]:.0f} | {rss[1]:.0f} |")
    with open(out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
