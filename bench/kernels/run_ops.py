#!/usr/bin/env python3
"""The newer ops' CPU kernels against PyTorch's, one thread each
(issue 49: each within 1.5x of PyTorch's op, or the reason).

Runs oasr-bench-ops (bench/kernels/OpsBench.cpp) and ops_torch.py on the
same shapes, interleaved for --rounds rounds, process CPU time, and writes
the medians with their ranges to OUT (markdown) beside the raw lines.

Usage: bench/kernels/run_ops.py --out bench/results/kernels-ops-DATE.md
           [--build build] [--torch-python /root/venv-torch/bin/python]
           [--rounds 3] [--min-time 1]
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# Why an op stays slower than 1.5x PyTorch's.
REASONS = {
    "ReduceProd": "64-element rows, each one chain of 8-lane products "
                  "(latency-bound); PyTorch's reduction vectorises across "
                  "rows",
    "Mod_fmod": "exact fmod per element through libm (std::fmod); PyTorch "
                "runs SLEEF's vectorised fmod",
    "GatherElements": "an offset per element from the index's coordinates "
                      "(a division per dimension), then a gather",
    "ScatterElements_add": "the offsets as GatherElements', then adds in "
                           "index order on one thread, so repeated indices "
                           "add deterministically",
}


def parse(text):
    rows = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip() or line.startswith("op "):
            continue
        name, ms, _ = line.split()
        rows[name] = float(ms)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--build", default="build")
    ap.add_argument("--torch-python", default="/root/venv-torch/bin/python")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--min-time", type=float, default=1.0)
    a = ap.parse_args()
    if os.path.exists(a.out):
        sys.exit(f"{a.out} exists; results are never overwritten")
    subprocess.run(["ninja", "-C", a.build, "oasr-bench-ops"], check=True,
                   stdout=subprocess.DEVNULL)
    oasr_cmd = [os.path.join(a.build, "bench", "oasr-bench-ops"), "--threads",
                "1", "--min-time", str(a.min_time), "--clock", "cpu"]
    torch_cmd = [a.torch_python, os.path.join(HERE, "ops_torch.py"),
                 "--threads", "1", "--min-time", str(a.min_time), "--clock",
                 "cpu"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    runs = {"oasr": [], "torch": []}
    raw, loads = [], []
    for r in range(a.rounds):
        for side, cmd in (("oasr", oasr_cmd), ("torch", torch_cmd)):
            loads.append(os.getloadavg()[0])
            out = subprocess.run(cmd, check=True, capture_output=True,
                                 text=True, env=env).stdout
            raw.append(f"## round {r + 1}, {side}\n{out}")
            runs[side].append(parse(out))
    header = [l for l in raw[1].splitlines() if l.startswith("# torch")][0]
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), "?")
    lines = [f"# Newer ops' CPU kernels against PyTorch, {time.strftime('%Y-%m-%d')}",
             "",
             f"`bench/kernels/run_ops.py --out {a.out} --rounds {a.rounds}`: "
             f"oasr-bench-ops (the cpu backend's kernel, one thread) and "
             f"ops_torch.py ({header[2:]}) on the same shapes, interleaved, "
             f"process CPU time per call, the median of {a.rounds} rounds with "
             f"the range. Machine: {cpu}, {os.cpu_count()} cores, load "
             f"{min(loads):.2f}-{max(loads):.2f} (other work ran beside it).",
             "",
             "| op | elements | oasr ms | PyTorch ms | oasr / PyTorch | note |",
             "|---|---|---|---|---|---|"]
    elements = {}
    for line in raw[0].splitlines():
        parts = line.split()
        if len(parts) == 3 and not line.startswith(("#", "op ")):
            elements[parts[0]] = parts[2]
    worst = []
    for name in runs["oasr"][0]:
        o = [r[name] for r in runs["oasr"]]
        t = [r[name] for r in runs["torch"]]
        mo, mt = statistics.median(o), statistics.median(t)
        ratio = mo / mt
        note = "" if ratio <= 1.5 else REASONS.get(name, "over 1.5x: no reason found")
        if ratio > 1.5:
            worst.append(name)
        lines.append(f"| {name} | {elements.get(name, '')} | {mo:.3f} "
                     f"({min(o):.3f}-{max(o):.3f}) | {mt:.3f} "
                     f"({min(t):.3f}-{max(t):.3f}) | {ratio:.2f}x | {note} |")
    lines += ["", f"Over 1.5x: {', '.join(worst) if worst else 'none'}.", "",
              "## Raw output", "", "```"] + raw + ["```", ""]
    with open(a.out, "w") as f:
        f.write("\n".join(lines))
    print(f"wrote {a.out}; over 1.5x: {worst}")


if __name__ == "__main__":
    main()
