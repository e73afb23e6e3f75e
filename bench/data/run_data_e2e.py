#!/usr/bin/env python3
"""A training step fed from a JPEG folder against the same step on
synthetic data (issue 50: the loader's cost in the step).

Exports torchvision's --model (scripts/export_models.py, training mode,
batch --batch), writes --images 500x375 JPEGs in 10 classes, and runs
oasr-run --steps on each source, interleaved for --rounds rounds:
imagefolder with RandomResizedCrop + flip + ImageNet normalisation, and
synthetic. Reports the median step (the summary's mean iteration) and the
loader's decode time from the summary's data line. Writes OUT.

Usage: bench/data/run_data_e2e.py --out bench/results/data-e2e-DATE.md
           [--model resnet18] [--batch 16] [--steps 6] [--rounds 3]
           [--precision f32] [--threads 2]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from run_data import GEN  # noqa: E402


def run(cmd, env, metrics):
    if os.path.exists(metrics):
        os.remove(metrics)
    out = subprocess.run(cmd + [f"--metrics={metrics}", "--log-every=1"], check=True,
                         capture_output=True, text=True, env=env).stdout
    steps = [json.loads(l) for l in open(metrics) if l.strip()]
    # The metrics' step_ms is the wall time between progress lines: the
    # step and the data it waited for. The first step holds set-up.
    wall = statistics.median(l["step_ms"] for l in steps[1:])
    m = re.search(r"data\s+(\d+) images decoded in ([0-9.]+) s", out)
    return wall, (float(m.group(2)) if m else None), out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--precision", default="f32")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--images", type=int, default=256)
    ap.add_argument("--oasr-run", default=os.path.join(ROOT, "build/bin/oasr-run"))
    a = ap.parse_args()
    if os.path.exists(a.out):
        sys.exit(f"{a.out} exists; results are never overwritten")
    env = dict(os.environ)
    rows = {"imagefolder": [], "synthetic": []}
    decode = []
    loads = []
    with tempfile.TemporaryDirectory() as d:
        subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "scripts/export_models.py"),
                        d, "--models", a.model], check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run(["/usr/bin/python3", "-c", GEN, os.path.join(d, "jpegs"),
                        str(a.images)], check=True)
        model = os.path.join(d, f"{a.model}.onnx")
        base = [a.oasr_run, model, f"--batch={a.batch}", f"--steps={a.steps}",
                f"--threads={a.threads}", f"--precision={a.precision}", "--quiet"]
        for _ in range(a.rounds):
            for src in ("imagefolder", "synthetic"):
                loads.append(os.getloadavg()[0])
                extra = ([f"--data=imagefolder:{d}/jpegs", "--augment=resized-crop,flip",
                          "--normalize=imagenet"] if src == "imagefolder" else ["--data=synthetic"])
                it, dec, _ = run(base + extra, env, os.path.join(d, "m.jsonl"))
                rows[src].append(it)
                if dec is not None:
                    decode.append(dec / a.steps * 1e3)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), "?")
    mi, ms = statistics.median(rows["imagefolder"]), statistics.median(rows["synthetic"])
    md = statistics.median(decode)
    lines = [f"# A step fed from a JPEG folder against synthetic data, {time.strftime('%Y-%m-%d')}", "",
             f"`bench/data/run_data_e2e.py --out {a.out} --model {a.model} --batch {a.batch} "
             f"--steps {a.steps} --rounds {a.rounds} --precision {a.precision} --threads "
             f"{a.threads}`: torchvision's {a.model} exported for training, one rank, "
             f"{a.threads} threads, {a.precision}; {a.images} JPEGs of 500x375, "
             f"RandomResizedCrop 224 + flip + ImageNet normalisation, decoded on the step's "
             f"threads before each step. The step's wall time with the data it waited for "
             f"(the metrics file's step_ms; the first step left out), median over the "
             f"steps and then of {a.rounds} interleaved rounds. Machine: {cpu}, {os.cpu_count()} cores, "
             f"load {min(loads):.2f}-{max(loads):.2f}.", "",
             "| data | step ms, data included (range) |", "|---|---|",
             f"| imagefolder | {mi:.1f} ({min(rows['imagefolder']):.1f}-{max(rows['imagefolder']):.1f}) |",
             f"| synthetic | {ms:.1f} ({min(rows['synthetic']):.1f}-{max(rows['synthetic']):.1f}) |",
             "", f"imagefolder / synthetic: {mi / ms:.3f}; decoding a batch took {md:.1f} ms "
             f"(median; the summary's data line over the run's batches).", ""]
    open(a.out, "w").write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
