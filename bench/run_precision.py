#!/usr/bin/python3
"""Precision benchmark: oasr-run f32 and bf16 against PyTorch f32 and
autocast bf16 on the CPU, one rank.

    bench/run_precision.py --out NAME [--models resnet18,resnet50,vit_b_16,bert_base]
                           [--rounds 3] [--steps 4] [--batch 8] [--threads 1]
                           [--build BUILD] [--torch-venv /root/venv-torch]
                           [--work DIR] [--timeout 3600]

For every model of bench/precision.py (resnet18, resnet50, vit_b_16,
bert_base) export it once with bench/precision_export.py under Debian's
python3-torch (training mode, as bench/run_large_models.sh does) together
with one fixed batch, then in each round run, one after the other
(interleaved, so that a change in the host's load hits every contender
alike):
  * oasr-run MODEL.onnx --batch=B --threads=T --steps=N --data=... --lr=0.01
    --precision=f32, then the same with --precision=bf16,
  * bench/precision.py MODEL --mode f32, then --mode bf16 (the same seeded
    model and batch, SGD lr 0.01; bf16 is torch.autocast("cpu",
    dtype=torch.bfloat16) around forward and loss) in the PyPI PyTorch of
    --torch-venv.
A run's step times are the steps after its first. oasr-run's come from its
summary line (`mean iteration ... (median M ms, range A-B ms)`: every step
after the first, in microseconds); its progress lines (`step i/N ... X
img/s`, parsed as bench/run_models.py does) print rates to 0.1 img/s, so
they are kept in the JSON and used only when the summary is missing. A cell
is the median of the rounds' medians and [the smallest - the largest] step
of all rounds, in ms. Memory: oasr-run's own `memory:` line (activation
arena, weights+state, gradients as planned) and every run's peak resident
set (the child's ru_maxrss from wait4, the largest over the rounds).
oasr-run without --precision runs f32 without the flag (its default) and
its bf16 cell records the error, as does any run that fails.

Writes bench/results/NAME.json and bench/results/NAME.md, and refuses to
start if either exists: results are never overwritten. Needs the PyPI
PyTorch once:
    python3 -m venv /root/venv-torch && /root/venv-torch/bin/pip install torch torchvision numpy onnx
A full run (4 models, 3 rounds of 4 steps, batch 8, 1 thread) takes about
half an hour on an idle host; one run at a time, the largest (oasr-run f32
on ViT-B/16) peaks at about 3.5 GiB resident.
"""
import argparse
import datetime
import json
import os
import platform
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "bench")
DEBIAN_PY = "/usr/bin/python3"
MODELS = ["resnet18", "resnet50", "vit_b_16", "bert_base"]
CONTENDERS = [  # (key, column title), in the order of each round
    ("oasr-f32", "oasr f32"),
    ("oasr-bf16", "oasr bf16"),
    ("torch-f32", "PyTorch f32"),
    ("torch-bf16", "PyTorch autocast bf16"),
]

STEP_RE = re.compile(r"^step (\d+)/(\d+)\s+loss (\S+)\s.*?([0-9.]+) (?:img|seq)/s", re.M)
SUMMARY_RE = re.compile(r"mean iteration\s+([0-9.]+) ms \(median ([0-9.]+) ms, "
                        r"range ([0-9.]+)-([0-9.]+) ms")


def cpu_name():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def git_commit():
    def git(*args):
        return subprocess.run(["git", "-C", ROOT] + list(args), capture_output=True,
                              text=True).stdout.strip()
    head = git("rev-parse", "--short=12", "HEAD") or "?"
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return head + (" + uncommitted changes" if dirty else "")


def run_child(cmd, timeout):
    """(returncode, stdout, stderr, peak RSS in MiB) of cmd; the RSS is the
    child's own ru_maxrss (wait4), not the largest child's so far."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        p = subprocess.Popen(cmd, stdout=out, stderr=err, text=True)
        timer = threading.Timer(timeout, p.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(p.pid, 0)
        finally:
            timer.cancel()
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return p.returncode, out.read(), err.read(), usage.ru_maxrss / 1024.0


def failure(rc, stdout, stderr):
    """One line saying why a run failed: its last error line and the exit."""
    lines = [l.strip() for l in (stderr + "\n" + stdout).splitlines() if l.strip()]
    errors = [l for l in lines if "error" in l.lower() or "unknown" in l.lower()
              or "terminate" in l.lower() or "what()" in l]
    text = " ".join((errors or lines or [""])[-1].split())
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
        exit_text = f"killed by {name}"
    else:
        exit_text = f"exit {rc}"
    return f"{exit_text}: {text}" if text else exit_text


def oasr_run(a, onnx, data, precision, flag):
    cmd = [os.path.join(a.build, "bin", "oasr-run"), onnx, f"--batch={a.batch}",
           f"--threads={a.threads}", f"--steps={a.steps}", f"--data={data}", "--lr=0.01"]
    if flag:
        cmd.append(f"--precision={precision}")
    rc, out, err, rss = run_child(cmd, a.timeout)
    r = {"cmd": shlex.join(cmd), "rc": rc, "peak_rss_mib": rss,
         "memory": [l.strip() for l in (out + err).splitlines()
                    if re.search(r"memory|arena", l, re.I)]}
    plan = [l for l in out.splitlines() if "memory: " in l]
    if plan:
        r["memory_plan"] = plan[0].split("memory: ", 1)[1].strip()
    steps = [(int(m.group(1)), float(m.group(3)), float(m.group(4)))
             for m in STEP_RE.finditer(out)]
    if steps:
        r["loss_first"], r["loss_last"] = steps[0][1], steps[-1][1]
        r["step_line_times_s"] = [a.batch / rate if rate > 0 else None
                                  for _, _, rate in steps]
    s = SUMMARY_RE.search(out)
    if rc:
        r["error"] = failure(rc, out, err)
    elif s:
        r["median_s"], r["min_s"], r["max_s"] = (float(s.group(k)) / 1e3 for k in (2, 3, 4))
        r["timing"] = "summary"
    elif len(steps) >= 2 and all(r["step_line_times_s"][1:]):
        t = r["step_line_times_s"][1:]
        r["median_s"], r["min_s"], r["max_s"] = statistics.median(t), min(t), max(t)
        r["timing"] = "step lines"
    else:
        r["error"] = "no summary and fewer than 2 progress lines in oasr-run's output"
    return r


def torch_run(a, python, model, mode):
    cmd = [python, os.path.join(BENCH, "precision.py"), model, "--mode", mode,
           "--batch", str(a.batch), "--threads", str(a.threads), "--steps", str(a.steps)]
    rc, out, err, rss = run_child(cmd, a.timeout)
    r = {"cmd": shlex.join(cmd), "rc": rc, "peak_rss_mib": rss}
    if rc:
        r["error"] = failure(rc, out, err)
        return r
    try:
        r.update(json.loads(out.strip().splitlines()[-1]))
    except (ValueError, IndexError):
        r["error"] = "no JSON line from bench/precision.py"
    r["peak_rss_mib"] = rss  # the child's, as for oasr-run
    return r


def export(a, model, work):
    stem = os.path.join(work, f"{model}-b{a.batch}")
    data_dir = stem + "-data"
    if os.path.exists(stem + ".onnx") and os.path.isdir(data_dir):
        if os.path.exists(os.path.join(data_dir, "tokens.bin")):
            data = "tokens:" + os.path.join(data_dir, "tokens.bin")
        else:
            data = "mnist:" + data_dir
        return {"onnx": stem + ".onnx", "data": data, "reused": True}
    cmd = [DEBIAN_PY, os.path.join(BENCH, "precision_export.py"), model, work,
           "--batch", str(a.batch)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"run_precision.py: exporting {model} failed:\n{out.stderr[-2000:]}")
    r = json.loads(out.stdout.strip().splitlines()[-1])
    r["cmd"] = shlex.join(cmd)
    return r


def aggregate(runs):
    """Median of the runs' medians, smallest and largest step, over the runs
    that succeeded; the errors of the others."""
    ok = [r for r in runs if "median_s" in r]
    agg = {"runs": len(runs), "ok": len(ok),
           "errors": sorted({r["error"] for r in runs if "error" in r})}
    if ok:
        agg["median_s"] = statistics.median(r["median_s"] for r in ok)
        agg["min_s"] = min(r["min_s"] for r in ok)
        agg["max_s"] = max(r["max_s"] for r in ok)
    rss = [r["peak_rss_mib"] for r in runs if r.get("peak_rss_mib")]
    if rss:
        agg["peak_rss_mib"] = max(rss)
    plans = [r["memory_plan"] for r in runs if "memory_plan" in r]
    if plans:
        agg["memory_plan"] = plans[0]
    return agg


def cell(agg):
    if "median_s" not in agg:
        return "fails: " + "; ".join(agg["errors"]).replace("|", "\\|")
    text = f"{1e3 * agg['median_s']:.1f} [{1e3 * agg['min_s']:.1f}-{1e3 * agg['max_s']:.1f}]"
    if agg["errors"]:
        text += f" ({agg['runs'] - agg['ok']} of {agg['runs']} failed: " + \
            "; ".join(agg["errors"]).replace("|", "\\|") + ")"
    return text


def ratio(x, y):
    if "median_s" not in x or "median_s" not in y:
        return "-"
    return f"{x['median_s'] / y['median_s']:.2f}x"


def write_md(path, res):
    h = res["host"]
    with open(path, "x") as f:
        f.write("# Mixed precision: oasr-run against PyTorch CPU autocast (one rank)\n\n")
        f.write(f"{res['date']}; {h['cpu']}, {h['cores']} cores ({h['machine']}); "
                f"load average (1/5/15 min) {fmt_load(res['load_before'])} before, "
                f"{fmt_load(res['load_after'])} after, 1-min load "
                f"{min(res['load_samples']):.2f}-{max(res['load_samples']):.2f} between runs.\n")
        f.write(f"oasr {res['oasr_commit']}, {res['oasr_binary']}; "
                f"PyTorch {res['torch']} (oneDNN {'available' if res['mkldnn'] else 'absent'}) "
                f"from {res['torch_venv']}; ONNX exported with torch {res['export_torch']} "
                f"({DEBIAN_PY}).\n")
        f.write(f"Batch {res['batch']}, {res['threads']} thread(s), {res['rounds']} interleaved "
                f"round(s) of {res['steps']} steps each (the first step of every run not "
                f"timed); SGD lr 0.01 on one fixed batch. Cells: median of the rounds' "
                f"median step [fastest-slowest step of all rounds], ms; ratios of the "
                f"medians (below 1: oasr faster). oasr-run's times from its summary line.\n")
        if not res["oasr_has_precision"]:
            f.write("\noasr-run has no --precision option: its f32 ran without the flag "
                    "(f32 is its default); the bf16 cells hold the error.\n")
        f.write("\n| model | " + " | ".join(t for _, t in CONTENDERS) +
                " | oasr bf16 / PyTorch bf16 | oasr f32 / PyTorch f32 | peak RSS (MiB): " +
                " / ".join(t for _, t in CONTENDERS) + " |\n")
        f.write("|---|" + "---|" * (len(CONTENDERS) + 3) + "\n")
        for row in res["rows"]:
            ag = row["agg"]
            rss = " / ".join(f"{ag[k]['peak_rss_mib']:.0f}" if "peak_rss_mib" in ag[k] else "-"
                             for k, _ in CONTENDERS)
            f.write(f"| {row['model']} | " + " | ".join(cell(ag[k]) for k, _ in CONTENDERS) +
                    f" | {ratio(ag['oasr-bf16'], ag['torch-bf16'])}"
                    f" | {ratio(ag['oasr-f32'], ag['torch-f32'])} | {rss} |\n")
        f.write("\noasr-run's memory line (as planned: activation arena, weights + "
                "optimizer state, gradients):\n\n| model | f32 | bf16 |\n|---|---|---|\n")
        for row in res["rows"]:
            ag = row["agg"]
            f.write(f"| {row['model']} | {ag['oasr-f32'].get('memory_plan', '-')} | "
                    f"{ag['oasr-bf16'].get('memory_plan', '-')} |\n")
        f.write("\nCommands (from the repository's root; WORK is the export directory; "
                "every round runs the same four):\n\n```sh\n")
        f.write(f"{res['command']}\n")

        def short(cmd):
            return cmd.replace(res["work"], "WORK").replace(ROOT + "/", "")
        for row in res["rows"]:
            if row["export"].get("cmd"):
                f.write(short(row["export"]["cmd"]) + "\n")
            for k, _ in CONTENDERS:
                runs = row["runs"][k]
                if runs:
                    f.write(short(runs[-1]["cmd"]) + "\n")
        f.write("```\n")


def fmt_load(load):
    return "/".join(f"{x:.2f}" for x in load)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="results name: bench/results/NAME.{json,md}")
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--torch-venv", default="/root/venv-torch")
    p.add_argument("--work", default="",
                   help="keep the exports here and reuse those already there "
                        "(default: a temporary directory, removed at the end)")
    p.add_argument("--timeout", type=float, default=3600, help="seconds per run")
    a = p.parse_args()
    a.build = os.path.abspath(a.build)
    models = [m for m in a.models.split(",") if m]
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        p.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(MODELS)}")
    if a.steps < 2:
        p.error("--steps must be at least 2 (the first step of a run is not timed)")
    if not re.fullmatch(r"[A-Za-z0-9._-]+", a.out):
        p.error("--out is a file name without directories")
    results = os.path.join(BENCH, "results")
    out_json = os.path.join(results, a.out + ".json")
    out_md = os.path.join(results, a.out + ".md")
    for path in (out_json, out_md):
        if os.path.exists(path):
            sys.exit(f"run_precision.py: error: {path} exists; results are never "
                     f"overwritten, pick another --out")
    oasr = os.path.join(a.build, "bin", "oasr-run")
    if not os.access(oasr, os.X_OK):
        sys.exit(f"run_precision.py: error: no oasr-run at {oasr} (build first, or --build)")
    pypi_py = os.path.join(a.torch_venv, "bin", "python")
    if not os.path.exists(pypi_py):
        sys.exit(f"run_precision.py: error: no PyPI PyTorch at {pypi_py} "
                 f"(see the set-up in this script's help)")
    helptext = subprocess.run([oasr, "--help"], capture_output=True, text=True).stdout
    has_precision = "--precision" in helptext
    probe = subprocess.run([pypi_py, "-c", "import torch, json; print(json.dumps("
                            "[torch.__version__, torch.backends.mkldnn.is_available()]))"],
                           capture_output=True, text=True, check=True)
    torch_version, mkldnn = json.loads(probe.stdout)
    export_torch = subprocess.run([DEBIAN_PY, "-c", "import torch; print(torch.__version__)"],
                                  capture_output=True, text=True).stdout.strip() or "?"

    work = os.path.abspath(a.work) if a.work else tempfile.mkdtemp(prefix="oasr-precision-")
    os.makedirs(work, exist_ok=True)
    res = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ"),
           "host": {"cpu": cpu_name(), "cores": os.cpu_count(), "machine": platform.machine()},
           "command": shlex.join([os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:]),
           "oasr_commit": git_commit(), "oasr_binary": oasr,
           "oasr_has_precision": has_precision,
           "torch": torch_version, "mkldnn": mkldnn, "torch_venv": a.torch_venv,
           "export_torch": export_torch,
           "batch": a.batch, "threads": a.threads, "steps": a.steps, "rounds": a.rounds,
           "work": work, "load_before": list(os.getloadavg()), "load_samples": [], "rows": []}
    res["load_samples"].append(res["load_before"][0])
    try:
        for model in models:
            exp = export(a, model, work)
            runs = {k: [] for k, _ in CONTENDERS}
            for rnd in range(a.rounds):
                for key, _ in CONTENDERS:
                    side, prec = key.split("-")
                    if side == "oasr":
                        r = oasr_run(a, exp["onnx"], exp["data"], prec,
                                     has_precision or prec != "f32")
                    else:
                        r = torch_run(a, pypi_py, model, prec)
                    r["round"] = rnd
                    runs[key].append(r)
                    res["load_samples"].append(os.getloadavg()[0])
                    shown = (f"{1e3 * r['median_s']:.1f} ms" if "median_s" in r
                             else r.get("error", "?"))
                    print(f"{model} round {rnd + 1}/{a.rounds} {key}: {shown}, "
                          f"peak RSS {r['peak_rss_mib']:.0f} MiB", flush=True)
            row = {"model": model, "export": exp, "runs": runs,
                   "agg": {k: aggregate(v) for k, v in runs.items()}}
            res["rows"].append(row)
    finally:
        if not a.work:
            shutil.rmtree(work, ignore_errors=True)
    res["load_after"] = list(os.getloadavg())
    os.makedirs(results, exist_ok=True)
    with open(out_json, "x") as f:
        json.dump(res, f, indent=1)
    write_md(out_md, res)
    print(open(out_md).read())
    print(f"wrote {out_json} and {out_md}")


if __name__ == "__main__":
    main()
