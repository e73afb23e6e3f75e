#!/usr/bin/python3
"""Training curves in bf16 and f16 against f32: does mixed precision train
as well?

    bench/run_precision_curves.py --out NAME [--build BUILD] [--steps 300]
                                  [--seeds 3]

Two real data sets that ship with Debian's python3-sklearn: the 8x8 digits
as MNIST IDX files (scripts/make_digits.py; a BatchNorm CNN,
test/runtime/Inputs/export_model.py digits-cnn) and the same digits as
CIFAR-10 binary records (test/runtime/Inputs/write_cifar.py; cifar-cnn).
For every seed, precision (f32, bf16, f16 with dynamic loss scaling) and
data set: oasr-run, 1 rank, 1 thread, batch 16, momentum SGD lr 0.05,
STEPS steps, progress every 50. Reports per data set and precision, as the
mean over seeds: the final loss (the mean loss of the last 50 steps), the
held-out accuracy, and f16's loss scale and skipped steps; the criteria of
the mixed-precision issue are a final loss within 2 % of f32's and a test
accuracy within 1 point. Writes bench/results/NAME.{json,md}; refuses to
overwrite them.
"""
import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = "/usr/bin/python3"


def run(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"{' '.join(cmd)}: {out.stderr.strip()[-400:]}")
    return out.stdout


def cpu_name():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "?"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--seeds", type=int, default=3)
    a = p.parse_args()
    res = os.path.join(ROOT, "bench", "results")
    md_path, json_path = (os.path.join(res, a.out + ext) for ext in (".md", ".json"))
    for f in (md_path, json_path):
        if os.path.exists(f):
            sys.exit(f"{f} exists: results files are never overwritten; choose another --out")
    oasr = os.path.join(a.build, "bin", "oasr-run")
    load_before = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory() as work:
        run([PY, os.path.join(ROOT, "scripts", "make_digits.py"), f"{work}/digits"])
        run([PY, os.path.join(ROOT, "test", "runtime", "Inputs", "write_cifar.py"), f"{work}/cifar"])
        exp = os.path.join(ROOT, "test", "runtime", "Inputs", "export_model.py")
        run([PY, exp, "digits-cnn", f"{work}/digits.onnx"])
        run([PY, exp, "cifar-cnn", f"{work}/cifar.onnx"])
        sets = [("digits (IDX)", f"{work}/digits.onnx", f"mnist:{work}/digits"),
                ("digits as CIFAR-10 records", f"{work}/cifar.onnx", f"cifar10:{work}/cifar")]
        for name, model, data in sets:
            for precision in ("f32", "bf16", "f16"):
                runs = []
                for seed in range(a.seeds):
                    cmd = [oasr, model, "--batch=16", f"--data={data}", "--optimizer=momentum",
                           "--lr=0.05", f"--steps={a.steps}", "--log-every=50", "--threads=1",
                           f"--seed={seed}", f"--precision={precision}"]
                    text = run(cmd)
                    losses = [float(m.group(1)) for m in re.finditer(r"^step \d+/\d+  loss ([0-9.naif]+)", text, re.M)]
                    acc = float(re.search(r"test accuracy +([0-9.]+)%", text).group(1))
                    scale = re.search(r"loss scale +([0-9]+) \(f16, dynamic: ([0-9]+) step", text)
                    runs.append({"seed": seed, "final_loss": losses[-1], "losses": losses,
                                 "test_accuracy": acc,
                                 "loss_scale": float(scale.group(1)) if scale else None,
                                 "skipped": int(scale.group(2)) if scale else 0})
                    print(f"{name} {precision} seed {seed}: final loss {losses[-1]:.4f}, "
                          f"test accuracy {acc:.1f}%", flush=True)
                sd = (lambda xs: statistics.stdev(xs) if len(xs) > 1 else 0.0)
                rows.append({"data": name, "precision": precision, "runs": runs,
                             "final_loss": statistics.mean(r["final_loss"] for r in runs),
                             "final_loss_sd": sd([r["final_loss"] for r in runs]),
                             "test_accuracy": statistics.mean(r["test_accuracy"] for r in runs),
                             "test_accuracy_sd": sd([r["test_accuracy"] for r in runs]),
                             "skipped": sum(r["skipped"] for r in runs),
                             "command": " ".join(cmd).replace(work, "WORK")})
    load_after = os.getloadavg()
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short=12", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ")
    f32 = {r["data"]: r for r in rows if r["precision"] == "f32"}
    lines = ["# Mixed precision: training curves against f32", "",
             f"{date}; {cpu_name()}, {os.cpu_count()} cores; load average {load_before[0]:.2f}/"
             f"{load_before[1]:.2f} before, {load_after[0]:.2f}/{load_after[1]:.2f} after; "
             f"oasr {commit}.",
             f"1 rank, 1 thread, batch 16, momentum SGD lr 0.05, {a.steps} steps, {a.seeds} seeds "
             "(the data order; the weights are the exported model's); cells are means over the seeds. Final loss: the mean "
             "loss of the last 50 steps. The issue's criteria: within 2 % of f32's final loss "
             "and 1 point of its test accuracy.", "",
             "Each cell: the mean over seeds ± the standard deviation between seeds (f32's own "
             "spread is the noise any comparison sits in).", "",
             "| data | precision | final loss | vs f32 | test accuracy | vs f32 | f16 steps skipped (all seeds) | meets both |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        base = f32[r["data"]]
        dl = (r["final_loss"] - base["final_loss"]) / base["final_loss"]
        da = r["test_accuracy"] - base["test_accuracy"]
        ok = abs(dl) <= 0.02 and abs(da) <= 1.0
        r.update({"loss_vs_f32": dl, "accuracy_vs_f32": da, "meets": ok})
        lines.append(f"| {r['data']} | {r['precision']} | {r['final_loss']:.4f} ± {r['final_loss_sd']:.4f} | "
                     f"{100 * dl:+.1f} % | "
                     f"{r['test_accuracy']:.1f}% ± {r['test_accuracy_sd']:.1f} | {da:+.1f} | "
                     f"{r['skipped'] if r['precision'] == 'f16' else ''} | "
                     f"{'' if r['precision'] == 'f32' else ('yes' if ok else 'no')} |")
    lines += ["", "Commands (WORK: the temporary directory; --seed 0..N-1):", "", "```sh"]
    lines += [r["command"] for r in rows]
    lines += ["```", ""]
    os.makedirs(res, exist_ok=True)
    with open(md_path, "w") as f:
        f.write("\n".join(lines))
    with open(json_path, "w") as f:
        json.dump({"date": date, "commit": commit, "steps": a.steps, "seeds": a.seeds,
                   "load": [load_before, load_after], "rows": rows}, f, indent=1)
    print(f"wrote {md_path} and {json_path}")


if __name__ == "__main__":
    main()
