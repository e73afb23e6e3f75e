#!/usr/bin/python3
"""Model-family benchmark: oasr-run against PyTorch on the same models.

    bench/run_models.py [--build BUILD] [--rounds 3] [--steps 10]
                        [--batch 32] [--threads 2] [--models a,b,...]
                        [--torch-venv /root/venv-torch]

For every model of scripts/model_zoo.py: export it (Debian's python3-torch,
training mode), then in each round run, one after the other (interleaved so
that a change in the host's load hits every contender alike):
  * oasr-run MODEL.onnx --steps=N --threads=T (1 rank; step times from its
    progress lines),
  * PyTorch 2.x from PyPI (MKL + oneDNN) in a virtual environment
    (bench/models.py), the fastest PyTorch CPU build that installs here,
  * Debian's python3-torch 1.13 (generic BLAS), for reference.
Reports the median step time (steps after the first, over all rounds), its
range, and oasr's ratio to each PyTorch; records the host, load average and
date. Writes bench/results/models.json and bench/results/models.md.

Set up the PyPI build once with:
    python3 -m venv /root/venv-torch && /root/venv-torch/bin/pip install torch torchvision numpy
"""
import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ZOO = os.path.join(ROOT, "scripts", "model_zoo.py")
DEBIAN_PY = "/usr/bin/python3"


def cpu_name():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def oasr_steps(build, onnx, data, a):
    out = subprocess.run(
        [os.path.join(build, "bin", "oasr-run"), onnx, f"--batch={a.batch}",
         f"--data={data}", f"--steps={a.steps}", f"--threads={a.threads}"],
        capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(out.stderr.strip().splitlines()[-1] if out.stderr else "oasr-run failed")
    rates = [float(m.group(1)) for m in re.finditer(r"^step \d+/\d+ .* ([0-9.]+) (?:img|seq)/s", out.stdout, re.M)]
    if len(rates) < 2:
        raise RuntimeError("no progress lines in oasr-run's output")
    return [a.batch / r for r in rates[1:]]


def torch_steps(python, model, a):
    out = subprocess.run([python, os.path.join(ROOT, "bench", "models.py"), model,
                          "--batch", str(a.batch), "--threads", str(a.threads),
                          "--steps", str(a.steps)], capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(out.stderr.strip().splitlines()[-1])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--models", default="")
    p.add_argument("--torch-venv", default="/root/venv-torch")
    a = p.parse_args()
    models = a.models.split(",") if a.models else subprocess.run(
        [DEBIAN_PY, ZOO, "list"], capture_output=True, text=True, check=True).stdout.split()
    pypi_py = os.path.join(a.torch_venv, "bin", "python")
    if not os.path.exists(pypi_py):
        sys.exit(f"run_models.py: no PyPI PyTorch at {pypi_py} (see the set-up in this script's help)")
    work = tempfile.mkdtemp(prefix="oasr-models-")
    load = [os.getloadavg()[0]]
    rows = []
    for m in models:
        onnx = os.path.join(work, m + ".onnx")
        subprocess.run([DEBIAN_PY, ZOO, "export", m, onnx, "--batch", str(a.batch)],
                       check=True, capture_output=True)
        data = "synthetic"  # seeded images or token ids, as the model's input asks
        times = {"oasr": [], "pypi": [], "debian": []}
        info = {}
        error = ""
        for _ in range(a.rounds):
            try:
                times["oasr"] += oasr_steps(a.build, onnx, data, a)
            except RuntimeError as e:
                error = str(e)
            for key, py in (("pypi", pypi_py), ("debian", DEBIAN_PY)):
                r = torch_steps(py, m, a)
                info[key] = f"torch {r['torch']} ({r['blas']})"
                times[key].append(r["median_s"])
            load.append(os.getloadavg()[0])
        row = {"model": m, "error": error}
        for key, t in times.items():
            if t:
                row[key] = {"median_s": statistics.median(t), "min_s": min(t), "max_s": max(t)}
        row["builds"] = info
        rows.append(row)
        print(json.dumps(row), flush=True)
    result = {"date": datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%MZ"),
              "host": f"{platform.machine()}, {os.cpu_count()} cores, {cpu_name()}",
              "load_avg": {"min": min(load), "max": max(load)},
              "batch": a.batch, "threads": a.threads, "steps": a.steps, "rounds": a.rounds,
              "rows": rows}
    out = os.path.join(ROOT, "bench", "results")
    os.makedirs(out, exist_ok=True)
    json.dump(result, open(os.path.join(out, "models.json"), "w"), indent=1)
    with open(os.path.join(out, "models.md"), "w") as f:
        builds = rows[0]["builds"] if rows else {}
        f.write("# Model families: oasr-run vs PyTorch CPU (one rank)\n\n")
        f.write(f"{result['date']}, {result['host']}, load average {min(load):.2f}-{max(load):.2f}; "
                f"batch {a.batch}, {a.threads} threads, {a.rounds} interleaved rounds of "
                f"{a.steps} steps (the first of each round dropped). PyPI: {builds.get('pypi', '?')}; "
                f"Debian: {builds.get('debian', '?')}. Goal: oasr step <= 1.0x the fastest "
                f"PyTorch (PyPI's). Rerun with `bench/run_models.py`.\n\n")
        f.write("| model | oasr step (ms), median [range] | PyPI torch (ms) | Debian torch (ms) | oasr / PyPI | oasr / Debian |\n")
        f.write("|---|---|---|---|---|---|\n")
        for r in rows:
            def cell(k):
                v = r.get(k)
                return f"{1e3 * v['median_s']:.1f} [{1e3 * v['min_s']:.1f}-{1e3 * v['max_s']:.1f}]" if v else "-"
            def ratio(k):
                if "oasr" not in r or k not in r:
                    return "-"
                return f"{r['oasr']['median_s'] / r[k]['median_s']:.2f}x"
            oasr = cell("oasr") if "oasr" in r else f"fails: {r['error']}"
            f.write(f"| {r['model']} | {oasr} | {cell('pypi')} | {cell('debian')} | {ratio('pypi')} | {ratio('debian')} |\n")
    print(f"wrote {out}/models.md")


if __name__ == "__main__":
    main()
